"""Answers as real models write them, through real runs: each ends on a defined branch with the
reason in its ledger (the branch evaluations, or the step's error), within seconds, never on a
silent default and never stranded.

The judge, the writer and the classifier are scripted actors answering the messy text; the
stream cut halfway comes from the stub model server over HTTP, and the tool's `NaN` from a real
MCP server. The parsers' own cases are in tests/engine/test_messy_answers.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from runner import services
from runner.models import Run, StepRun
from runner.status import RunStatus, StepStatus
from tests.factories import ActorFactory, UserFactory
from tests.runner.providers.stub_server import StubServer, reply, sse, stub_server
from tests.runner.recipes import DEFAULT, branch, drive, publish_document, steps, stub_actor
from tests.tools.mcp_server import McpTestServer
from tools.client import discover
from tools.models import ToolServer
from workflows.models import Recipe

__all__ = ["stub_server"]

pytestmark = pytest.mark.django_db

FAILED = {"type": "execution_error", "operator": "equals", "value": True}
GOOD = {"type": "ai_evaluation", "operator": "greater_equal", "value": 7, "evaluator": "judge"}
SCORE_HIGH = {"type": "field_compare", "operator": "greater_equal", "field": "score", "value": 5}
# Every messy answer must have been dealt with in this time (the bug was minutes of retries).
PROMPTLY_S = 10


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="messy")


@pytest.fixture
def scripted(db: None) -> None:
    for name in ("m-writer", "m-judge", "m-classifier"):
        ActorFactory(name=name, config={"replies": ["unused"]})


def llm(key: str, *branches: dict[str, Any], actor: str = "writer") -> dict[str, Any]:
    return {
        "key": key,
        "name": key.title(),
        "kind": "llm",
        "actor": actor,
        "prompt": "Write about owls.",
        "branches": list(branches) or [branch("done", 999, DEFAULT, "@complete")],
    }


def publish(owner: Any, slug: str, *steps_: dict[str, Any]) -> Recipe:
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": slug,
            "name": slug,
            "actors": {"writer": "m-writer", "judge": "m-judge", "classifier": "m-classifier"},
            "steps": [*steps_, llm("apologise")],
        },
    )


def finished(owner: Any, recipe: Recipe, script: dict[str, Any]) -> Run:
    began = time.monotonic()
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=script))
    assert time.monotonic() - began < PROMPTLY_S
    assert run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.ENDED), run.status
    return run


def ledger(step_run: StepRun) -> dict[str, tuple[bool, str]]:
    """The branches evaluated on the step: matched, and why."""
    return {e.branch: (e.matched, e.reason) for e in step_run.evaluations.all()}


def taken(step_run: StepRun) -> str:
    return str(step_run.evaluations.get(taken=True).branch)


# -- a judge's score, as judges write it --------------------------------------------------------


@pytest.fixture
def judged(owner: Any, scripted: None) -> Recipe:
    """`write`, judged: 7 or more completes, less (or no score) goes to `apologise`."""
    return publish(
        owner,
        "judged",
        llm(
            "write",
            branch("broken", 1, FAILED, "apologise", action="ERROR_HANDLER"),
            branch("good", 2, GOOD, "@complete"),
            branch("weak", 999, DEFAULT, "apologise"),
        ),
    )


@pytest.mark.parametrize(
    ("verdict", "branch_taken", "reason"),
    [
        (
            "This story is filled with vivid details and a haunting end... 7",
            "good",
            "judge scored 7 >= 7",
        ),
        ("7/10", "good", "judge scored 7 >= 7"),
        ("Score: 7.5", "good", "judge scored 7.5 >= 7"),
        ("4/5 - a fine story", "good", "judge scored 8 >= 7"),
        ('```json\n{"score": 8}\n```', "good", "judge scored 8 >= 7"),
        ("Score: 70", "weak", "judge score 70 is outside the scale 1-10"),
        ('{"score": NaN, "verdict": "ok"}', "weak", "judge gave a score that is not a number: NaN"),
        ("The 3 owls were vivid, I'd say 8", "weak", "judge answer has several numbers (3, 8)"),
        ("I'm sorry, but I can't rate this text.", "weak", "judge refused to score"),
    ],
    ids=[
        "prose",
        "over-ten",
        "labelled",
        "over-five",
        "fenced-json",
        "off-scale",
        "nan",
        "several",
        "refusal",
    ],
)
def test_a_judges_messy_score_is_read_or_refused_with_the_reason(
    owner: Any, judged: Recipe, verdict: str, branch_taken: str, reason: str
) -> None:
    run = finished(owner, judged, {"writer": ["Owls hunt at night.", "Sorry."], "judge": [verdict]})

    write = steps(run)["write"]
    assert taken(write) == branch_taken
    assert ledger(write)["good"][1].startswith(reason), ledger(write)["good"]


def test_an_empty_answer_fails_the_call_and_the_error_branch_takes_the_run_on(
    owner: Any, judged: Recipe
) -> None:
    run = finished(owner, judged, {"writer": ["  ", "Sorry."], "judge": ["9"]})

    write = steps(run)["write"]
    assert write.status == StepStatus.FAILED
    assert write.error == "actor 'm-writer' answered with no text"
    assert taken(write) == "broken"
    assert write.model_calls == 1
    [call] = write.modelcall_set.all()
    assert call.error == "actor 'm-writer' answered with no text"
    assert call.tokens_in  # the prompt was sent, and counted: an empty answer is paid for
    assert list(run.steps.values_list("step_key", flat=True)) == ["write", "apologise"]


# -- JSON, as models write it -----------------------------------------------------------------


@pytest.fixture
def scored(owner: Any, scripted: None) -> Recipe:
    """`rate` answers JSON; its `score` of 5 or more completes, else `apologise`."""
    return publish(
        owner,
        "scored",
        llm(
            "rate",
            branch("high", 1, SCORE_HIGH, "@complete"),
            branch("other", 999, DEFAULT, "apologise"),
        ),
    )


@pytest.mark.parametrize(
    ("answer", "branch_taken", "reason"),
    [
        ('```json\n{"score": 8}\n```', "high", "field score 8 >= 5"),
        (
            '{"score": 8}\n\nI hope this helps! Let me know if you need more.',
            "high",
            "field score 8 >= 5",
        ),
        ('{"score": NaN, "verdict": "ok"}', "other", "field score missing"),
        ('{"score": Infinity}', "other", "field score missing"),
    ],
    ids=["fenced", "trailing-commentary", "nan", "infinity"],
)
def test_an_answers_json_becomes_facts_as_json_has_it(
    owner: Any, scored: Recipe, answer: str, branch_taken: str, reason: str
) -> None:
    run = finished(owner, scored, {"writer": [answer, "Sorry."]})

    rate = steps(run)["rate"]
    assert rate.status == StepStatus.SUCCEEDED
    assert rate.response == answer  # kept as written
    assert taken(rate) == branch_taken
    assert ledger(rate)["high"][1] == reason


# -- a classifier's answer, as classifiers write it -----------------------------------------------


@pytest.fixture
def triage(owner: Any, scripted: None) -> Recipe:
    unclassified = {"type": "classification_failed", "operator": "equals", "value": True}
    billing = {"type": "route_selected", "operator": "includes", "value": "billing"}
    return publish(
        owner,
        "triage",
        {
            "key": "triage",
            "name": "Triage",
            "kind": "classify",
            "actor": "classifier",
            "prompt": "Where is my invoice?",
            "routes": [
                {"name": "billing", "instructions": "Invoices and payments."},
                {"name": "support", "instructions": "Anything broken."},
            ],
            "branches": [
                branch("unclassified", 1, unclassified, "apologise"),
                branch("billing", 2, billing, "@complete"),
                branch("other", 999, DEFAULT, "@end"),
            ],
        },
    )


@pytest.mark.parametrize(
    ("answers", "problem"),
    [
        (["Invoices and payments."] * 3, "the answer was neither JSON"),  # a route's description
        (["billing, support"] * 3, "the answer was neither JSON"),  # two routes
        (["Yes. No."] * 3, "the answer said both yes and no"),
        ([""] * 3, "actor 'm-classifier' answered with no text"),
        (["I'm sorry, I can't help with that."] * 3, "the classifier refused to answer"),
    ],
    ids=["description", "two-routes", "yes-and-no", "empty", "refusal"],
)
def test_a_classifier_answer_that_names_no_yes_or_no_takes_the_unclassified_branch(
    owner: Any, triage: Recipe, answers: list[str], problem: str
) -> None:
    script = {"classifier": [*answers, '{"selected": false}'], "writer": ["Sorry."]}
    run = finished(owner, triage, script)

    step = steps(run)["triage"]
    if problem.startswith("actor"):  # the call failed: the step did, with the reason
        assert (step.status, run.status) == (StepStatus.FAILED, RunStatus.FAILED)
        assert problem in step.error
        return
    assert taken(step) == "unclassified"
    assert step.details["classification_failure"].startswith(
        "billing: not selected, no readable answer in 3 tries: " + problem
    )


def test_a_classifier_that_writes_json_booleans_as_text_is_read(owner: Any, triage: Recipe) -> None:
    script = {"classifier": ['{"selected": "yes", "reason": "an invoice"}', '{"selected": "no"}']}
    run = finished(owner, triage, script)

    assert taken(steps(run)["triage"]) == "billing"
    assert run.status == RunStatus.SUCCEEDED


# -- a stream cut halfway, from a model server over HTTP ----------------------------------------


def test_a_stream_cut_halfway_fails_the_step_with_the_reason(
    owner: Any, stub_server: StubServer, settings: Any
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    stub_actor(stub_server, "m-streamer")  # an llm step streams its answer
    ActorFactory(name="m-writer", config={"replies": ["Sorry."]})
    recipe = publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "cut",
            "name": "cut",
            "actors": {"writer": "m-streamer", "fallback": "m-writer"},
            "steps": [
                llm("write", branch("broken", 1, FAILED, "apologise", action="ERROR_HANDLER")),
                llm("apologise", actor="fallback"),
            ],
        },
    )
    half = 'data: {"choices": [{"index": 0, "delta": {"content": "Once upon a"}}]}\n\n'
    stub_server.enqueue(sse(half))  # and the connection closes: no finish_reason, no [DONE]

    run = finished(owner, recipe, {})

    write = steps(run)["write"]
    assert write.status == StepStatus.FAILED
    assert "stopped mid-answer: its stream ended without a finish_reason" in write.error
    assert "11 characters had been streamed" in write.error
    assert taken(write) == "broken"
    assert run.status == RunStatus.SUCCEEDED


def test_what_a_server_says_of_itself_is_stored_as_its_columns_hold_it(
    owner: Any, stub_server: StubServer, settings: Any
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    stub_actor(stub_server, "m-named")
    recipe = publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "named",
            "name": "named",
            "actors": {"writer": "m-named"},
            "steps": [llm("write")],
        },
    )
    stub_server.enqueue(reply("Owls hunt at night.", model="m\x00" + "x" * 500))

    run = finished(owner, recipe, {})

    assert run.status == RunStatus.SUCCEEDED, run.error
    [call] = steps(run)["write"].modelcall_set.all()
    assert call.model == "m\ufffd" + "x" * 198  # the column's 200 characters


# -- a tool's JSON with NaN, from a real MCP server -----------------------------------------------


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpTestServer]:
    with McpTestServer() as server:
        yield server


def test_a_tools_nan_is_its_text_not_json_and_the_run_goes_on_at_once(
    owner: Any, scripted: None, mcp_server: McpTestServer, settings: Any
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = ["127.0.0.1"]
    server = ToolServer.objects.create(
        name="remote", transport=ToolServer.Transport.HTTP, url=mcp_server.url, timeout_s=10
    )
    discover(server)
    total = {
        "type": "tool_result",
        "operator": "greater_equal",
        "tool": "remote.verbatim",
        "field": "total",
        "value": 1,
    }
    recipe = publish(
        owner,
        "nan-tool",
        {
            "key": "sum",
            "name": "Sum",
            "kind": "tool",
            "tool": "remote.verbatim",
            "arguments": {"text": '{{"total": NaN}}'},
            "branches": [
                branch("counted", 1, total, "@complete"),
                branch("other", 999, DEFAULT, "apologise"),
            ],
        },
    )

    run = finished(owner, recipe, {"writer": ["Sorry."]})

    step = steps(run)["sum"]
    assert step.status == StepStatus.SUCCEEDED
    assert step.response == '{"total": NaN}'
    assert ledger(step)["counted"] == (False, "tool remote.verbatim result is not a JSON object")
    assert taken(step) == "other"
    assert run.status == RunStatus.SUCCEEDED
