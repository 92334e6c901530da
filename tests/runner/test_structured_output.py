"""Structured output through real runs: an llm step's `output_schema` sent to the stub model
server in the OpenAI-compatible and the Ollama wire formats (`response_format`), an answer
that misses it asked for again with its errors, the fields becoming facts a transform step
and branches read, and a `schema_valid` branch taking a step no answer of which met it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner import services
from runner.models import Run
from runner.status import RunStatus, StepStatus
from tests.factories import ActorFactory, UserFactory
from tests.runner.providers.stub_server import StubServer, reply, stub_server
from tests.runner.recipes import DEFAULT, branch, drive, publish_document, steps
from workflows.models import Actor, Recipe

__all__ = ["stub_server"]

pytestmark = pytest.mark.django_db

ITEM = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
    "required": ["name", "price"],
    "additionalProperties": False,
}
SCHEMA = {
    "type": "object",
    "properties": {
        "customer": {"type": "string", "pattern": "^[A-Z]"},
        "items": {"type": "array", "items": ITEM, "minItems": 1},
    },
    "required": ["customer", "items"],
    "additionalProperties": False,
}
ORDER = {"customer": "Ada", "items": [{"name": "tea", "price": 4.5}, {"name": "cake", "price": 8}]}
INVALID = "not valid"
SCHEMA_INVALID = {"type": "schema_valid", "value": False}
BIG = {"type": "field_compare", "operator": "greater_equal", "field": "total", "value": 10}


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="structured")


def order_recipe(owner: Any, actor: str) -> Recipe:
    """`extract` answers the order as JSON; `total` sums it; 10 or more is approved."""
    extract = {
        "key": "extract",
        "name": "Extract",
        "actor": "writer",
        "prompt": "Read the order: {order}",
        "output_schema": SCHEMA,
        "branches": [
            branch("unreadable", 1, SCHEMA_INVALID, "apologise", action="ERROR_HANDLER"),
        ],
    }
    total = {
        "key": "total",
        "name": "Total",
        "kind": "transform",
        "set": {
            "total": "sum(items[].price)",
            "first": "items[0].name",
            "who": "steps.extract.customer",
            "asked": "inputs.order",
        },
        "branches": [
            branch("big", 1, BIG, "@complete", action="QUALITY_APPROVED"),
            branch("small", 999, DEFAULT, "@end", action="END_RECIPE"),
        ],
    }
    apologise = {"key": "apologise", "name": "Apologise", "actor": "writer", "prompt": "Sorry."}
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": f"orders-{actor}",
            "name": "Orders",
            "inputs": {"order": {"type": "string", "required": True}},
            "actors": {"writer": actor},
            "steps": [extract, total, apologise],
        },
    )


@pytest.fixture(params=[Actor.Provider.OPENAI, Actor.Provider.OLLAMA])
def served(request: pytest.FixtureRequest, stub_server: StubServer, settings: Any) -> str:
    """An actor of the stub model server, in one wire format or the other; its name."""
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    provider = request.param
    # Ollama's base URL is written without /v1, as its users write it: the provider adds it.
    url = stub_server.base_url if provider == Actor.Provider.OPENAI else stub_server.url
    ActorFactory(
        name=f"so-{provider}",
        provider=provider,
        model="stub-1",
        base_url=url,
        api_key_env="",
        timeout_s=5,
        config={},
    )
    return f"so-{provider}"


def start(owner: Any, recipe: Recipe, **options: Any) -> Run:
    return drive(
        services.run_start(user=owner, recipe=recipe, inputs={"order": "tea and cake"}, **options)
    )


def test_the_schema_is_sent_an_invalid_answer_is_asked_again_and_its_fields_become_facts(
    owner: Any, served: str, stub_server: StubServer
) -> None:
    recipe = order_recipe(owner, served)
    stub_server.enqueue(reply("Sure! Ada ordered tea."), reply(json.dumps(ORDER)))

    run = start(owner, recipe)

    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "approved"), run.error
    first, second = stub_server.chat_requests
    for request in (first, second):
        assert request.path == "/v1/chat/completions"
        assert request.json["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "extract", "schema": SCHEMA, "strict": True},
        }
    # An enforcing server is not told the schema in the prompt too.
    assert first.prompt == "Read the order: tea and cake"
    assert second.prompt == (
        "Read the order: tea and cake\n\nYour previous answer did not match the required JSON "
        "Schema: the answer holds no JSON object. Answer again with only a JSON object that "
        "matches the schema."
    )
    done = steps(run)
    extract = done["extract"]
    assert json.loads(extract.response) == ORDER
    assert extract.details["output_schema"] == {
        "enforced": True,
        "answers": [
            {"response": "Sure! Ada ordered tea.", "errors": ["the answer holds no JSON object"]},
            {"response": json.dumps(ORDER), "errors": []},
        ],
        "valid": True,
        "errors": [],
        "attempts": 2,
    }
    assert [c.purpose for c in run.modelcall_set.order_by("pk")] == ["answer", "validation"]
    # The transform read the answer's fields as facts, its JSON and the run's inputs.
    total = done["total"]
    assert json.loads(total.response) == {
        "total": 12.5,
        "first": "tea",
        "who": "Ada",
        "asked": "tea and cake",
    }
    assert total.evaluations.get(taken=True).branch == "big"
    # Its results are added to the facts: the answer's fields are still there.
    assert run.state["facts"] == {"order": "tea and cake", **ORDER, **json.loads(total.response)}


def test_a_step_no_answer_of_which_meets_the_schema_fails_and_schema_valid_takes_it(
    owner: Any, served: str, stub_server: StubServer, client: Any
) -> None:
    recipe = order_recipe(owner, served)
    wrong = {"customer": "ada", "items": [{"name": "tea", "price": "4.50"}]}
    stub_server.enqueue(reply(json.dumps(wrong)), reply(f"```json\n{json.dumps(wrong)}\n```"))

    run = start(owner, recipe)

    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "error_handled"), run.error
    done = steps(run)
    assert list(done) == ["extract", "apologise"]
    extract = done["extract"]
    errors = (
        "customer: 'ada' does not match '^[A-Z]'; items.0.price: '4.50' is not of type 'number'"
    )
    assert extract.status == StepStatus.FAILED
    assert extract.error == f"no answer met the output schema in 2 answers: {errors}"
    assert extract.details["output_schema"]["valid"] is False
    [taken] = [e for e in extract.evaluations.all() if e.taken]
    assert (taken.branch, taken.reason) == ("unreadable", extract.error)
    # The second request carried the first answer's errors.
    assert f"did not match the required JSON Schema: {errors}." in (
        stub_server.chat_requests[1].prompt or ""
    )
    # The run's page shows each answer with its errors.
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Output schema: not met" in page
    assert "<code>items.0.price: &#x27;4.50&#x27; is not of type &#x27;number&#x27;</code>" in page


def test_a_dry_run_script_answers_a_structured_step_told_the_schema_in_its_prompt(
    owner: Any, db: None
) -> None:
    ActorFactory(name="so-scripted", config={"replies": ["unused"]})
    recipe = order_recipe(owner, "so-scripted")

    run = start(owner, recipe, script={"writer": ["no JSON here", json.dumps(ORDER)]})

    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "approved"), run.error
    extract = steps(run)["extract"]
    asked, told = extract.prompt.split(
        "\n\nAnswer with only a JSON object that matches this JSON Schema:\n"
    )
    assert (asked, json.loads(told)) == ("Read the order: tea and cake", SCHEMA)
    assert extract.details["output_schema"]["enforced"] is False
    assert json.loads(steps(run)["total"].response)["total"] == 12.5
