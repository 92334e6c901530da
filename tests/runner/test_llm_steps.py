"""LLM steps through the real provider clients, against the local stub server (OpenAI/Ollama,
Anthropic and Gemini wire formats)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from runner import services
from runner.models import ModelCall
from runner.publisher import publisher
from runner.status import RunStatus
from runner.steps import EXECUTORS
from tests.factories import ActorFactory
from tests.runner.conftest import wait_for
from tests.runner.providers.stub_server import StubServer, error, reply, stub_server
from workflows.models import Actor, Recipe
from workflows.services import recipe_import, recipe_publish

__all__ = ["stub_server"]

pytestmark = pytest.mark.django_db(transaction=True)

KEY_ENV = "BRANCHLINE_TEST_STUB_KEY"


def ask_document(*, handle_errors: bool) -> dict[str, Any]:
    branches = [
        {
            "name": "done",
            "priority": 10,
            "when": {"type": "default"},
            "action": "CONTINUE",
            "target": "@complete",
        },
    ]
    if handle_errors:
        branches.insert(
            0,
            {
                "name": "model_failed",
                "priority": 1,
                "when": {"type": "execution_error", "operator": "equals", "value": True},
                "action": "ERROR_HANDLER",
                "target": "apologise",
            },
        )
    return {
        "format": "branchline.recipe/v1",
        "slug": "ask",
        "name": "Ask a model",
        "inputs": {"question": {"type": "string", "required": True}},
        "actors": {"model": "stub-model", "fallback": "stub-fallback"},
        "steps": [
            {
                "key": "answer",
                "name": "Answer",
                "kind": "llm",
                "actor": "model",
                "prompt": "Answer briefly: {question}",
                "timeout_s": 5,
                "branches": branches,
            },
            {
                "key": "apologise",
                "name": "Apologise",
                "kind": "llm",
                "actor": "fallback",
                "prompt": "Say sorry about {question}",
                "branches": [
                    {
                        "name": "end",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "@complete",
                    }
                ],
            },
        ],
    }


@pytest.fixture
def ask_recipe(
    request: pytest.FixtureRequest,
    owner: Any,
    stub_server: StubServer,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Recipe:
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    monkeypatch.setenv(KEY_ENV, "sk-stub-secret")
    ActorFactory(
        name="stub-model",
        provider=Actor.Provider.OPENAI,
        model="stub-1",
        base_url=stub_server.base_url,
        api_key_env=KEY_ENV,
        config={},
        timeout_s=5,
    )
    ActorFactory(name="stub-fallback", config={"replies": ["Sorry, no answer today."]})
    handle = getattr(request, "param", True)
    recipe = recipe_import(user=owner, data=ask_document(handle_errors=handle)).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def test_it_streams_a_model_answer_and_records_its_usage(
    worker: Any, ask_recipe: Recipe, owner: Any, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("Forty-two, says the stub.", usage=(12, 6)))

    run = services.run_start(user=owner, recipe=ask_recipe, inputs={"question": "life?"})
    run = wait_for(run, RunStatus.SUCCEEDED)

    step = run.steps.get()
    assert (step.response, step.tokens_in, step.tokens_out) == ("Forty-two, says the stub.", 12, 6)
    assert step.actor_name == "stub-model"
    sent = stub_server.chat_requests[-1]
    assert sent.prompt == "Answer briefly: life?"
    assert sent.headers.get("authorization") == "Bearer sk-stub-secret"
    assert "sk-stub-secret" not in str(run.events.values_list("data", flat=True))


def test_a_failing_model_takes_the_error_branch(
    worker: Any, ask_recipe: Recipe, owner: Any, stub_server: StubServer
) -> None:
    stub_server.enqueue(*[error(500)] * 6)

    run = services.run_start(user=owner, recipe=ask_recipe, inputs={"question": "life?"})
    run = wait_for(run, RunStatus.SUCCEEDED, timeout=60)

    failed, apology = run.steps.order_by("seq")
    assert failed.status == "failed" and "500" in failed.error
    assert apology.response == "Sorry, no answer today."
    assert run.outcome == "error_handled"


@pytest.mark.parametrize("ask_recipe", [False], indirect=True)
def test_an_unhandled_model_failure_fails_the_run_with_the_reason(
    worker: Any, ask_recipe: Recipe, owner: Any, stub_server: StubServer
) -> None:
    stub_server.enqueue(error(400, "model 'stub-1' not found"))

    run = services.run_start(user=owner, recipe=ask_recipe, inputs={"question": "life?"})
    run = wait_for(run, RunStatus.FAILED)

    assert "step 'answer' failed" in run.error
    assert "not found" in run.error


def test_a_step_that_fails_without_a_message_still_fails_the_run(
    worker: Any, story_recipe: Recipe, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def raise_bare(session: Any) -> Any:
        raise LookupError  # an exception whose text is empty

    monkeypatch.setitem(EXECUTORS, "llm", raise_bare)

    run = services.run_start(user=owner, recipe=story_recipe, inputs={"topic": "sea"})
    run = wait_for(run, RunStatus.FAILED)

    assert run.error == "step 'write' failed: failed without a message"
    assert run.steps.get().status == "failed"


def test_a_streamed_answer_is_pushed_live_in_batches_and_never_stored_token_by_token(
    worker: Any, ask_recipe: Recipe, owner: Any, stub_server: StubServer, monkeypatch: Any
) -> None:
    chunks = [f"word{i} " for i in range(12)]
    stub_server.enqueue(reply(chunks=chunks, interval_s=0.05))  # about 0.6 s of trickling
    pushed: list[dict[str, Any]] = []
    send = publisher.send
    monkeypatch.setattr(
        publisher,
        "send",
        lambda group, message: (pushed.append(message), send(group, message))[1],
    )

    run = services.run_start(user=owner, recipe=ask_recipe, inputs={"question": "life?"})
    run = wait_for(run, RunStatus.SUCCEEDED)

    texts = [m["event"]["data"]["text"] for m in pushed if m["type"] == "run.token"]
    assert 2 <= len(texts) < len(chunks)  # live, but a batch per 100 ms, not a message a token
    assert "".join(chunks).startswith("".join(texts))
    assert not run.events.filter(type="step.token").exists()
    finished = run.events.get(type="step.finished")
    assert finished.data["response"] == "".join(chunks)


@pytest.fixture(params=[Actor.Provider.ANTHROPIC, Actor.Provider.GEMINI])
def native_recipe(
    request: pytest.FixtureRequest,
    owner: Any,
    stub_server: StubServer,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Recipe:
    """The ask recipe with its model an Anthropic or a Gemini actor at the stub, priced."""
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    monkeypatch.setenv(KEY_ENV, "sk-stub-secret")
    ActorFactory(
        name="stub-model",
        provider=request.param,
        model="stub-1",
        base_url=stub_server.url,  # the API's root, as the vendors' SDKs take it
        api_key_env=KEY_ENV,
        config={},
        timeout_s=5,
        price_in_per_million=Decimal("3"),
        price_out_per_million=Decimal("15"),
        currency="USD",
    )
    ActorFactory(name="stub-fallback", config={"replies": ["Sorry, no answer today."]})
    recipe = recipe_import(user=owner, data=ask_document(handle_errors=True)).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def test_a_run_streams_an_anthropic_or_gemini_answer_and_prices_its_tokens(
    worker: Any, native_recipe: Recipe, owner: Any, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(chunks=["Forty", "-two,", " says", " the stub."], usage=(120, 60)))

    run = services.run_start(user=owner, recipe=native_recipe, inputs={"question": "life?"})
    run = wait_for(run, RunStatus.SUCCEEDED)

    step = run.steps.get()
    assert (step.response, step.tokens_in, step.tokens_out) == (
        "Forty-two, says the stub.",
        120,
        60,
    )
    [call] = ModelCall.objects.filter(run=run)
    provider = Actor.objects.get(name="stub-model").provider
    assert (call.provider, call.model, call.tokens_estimated) == (provider, "stub-1", False)
    # (120 x 3 + 60 x 15) / 1e6, at the actor's prices.
    assert (call.cost, call.currency, step.cost) == (Decimal("0.00126"), "USD", Decimal("0.00126"))
    sent = stub_server.chat_requests[-1]
    assert sent.prompt == "Answer briefly: life?"
    expected_path = {
        Actor.Provider.ANTHROPIC: "/v1/messages",
        Actor.Provider.GEMINI: "/v1beta/models/stub-1:streamGenerateContent?alt=sse",
    }[provider]
    assert sent.path == expected_path
    assert "sk-stub-secret" in str(sent.headers)
    assert "sk-stub-secret" not in str(run.events.values_list("data", flat=True))


def test_a_failing_anthropic_or_gemini_model_takes_the_error_branch_with_its_reason(
    worker: Any, native_recipe: Recipe, owner: Any, stub_server: StubServer
) -> None:
    stub_server.enqueue(error(401, "invalid key sk-stub-secret"))

    run = services.run_start(user=owner, recipe=native_recipe, inputs={"question": "life?"})
    run = wait_for(run, RunStatus.SUCCEEDED)

    failed, apology = run.steps.order_by("seq")
    assert failed.status == "failed"
    assert "answered 401" in failed.error and "invalid key ***" in failed.error
    assert "sk-stub-secret" not in failed.error
    assert apology.response == "Sorry, no answer today."
    assert run.outcome == "error_handled"


def test_an_anthropic_or_gemini_model_out_of_time_fails_its_step_as_a_timeout(
    worker: Any, native_recipe: Recipe, owner: Any, stub_server: StubServer
) -> None:
    document = ask_document(handle_errors=True)
    document["slug"] = "ask-quickly"
    document["steps"][0]["timeout_s"] = 1
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)
    stub_server.enqueue(reply("too late", delay_s=4))

    run = services.run_start(user=owner, recipe=recipe, inputs={"question": "life?"})
    run = wait_for(run, RunStatus.SUCCEEDED)

    failed, apology = run.steps.order_by("seq")
    assert failed.status == "timed_out"
    provider = Actor.objects.get(name="stub-model").provider
    assert failed.error.endswith(f"{provider} at {stub_server.url} did not answer within 1 s")
    assert apology.response == "Sorry, no answer today."
