"""Error severities through real dry runs: a failure sent back to the classify step or to the
planning step, and a transient failure retried."""

from __future__ import annotations

from typing import Any

import pytest

from runner import reruns, services
from runner.models import Run
from runner.status import RunStatus
from tests.factories import ActorFactory
from tests.runner.providers.stub_server import StubServer, error, reply, stub_server
from tests.runner.recipes import DEFAULT, branch, drive, publish_document, steps, stub_actor
from workflows.models import Recipe

__all__ = ["stub_server"]

pytestmark = pytest.mark.django_db

COMPLETE = branch("done", 999, DEFAULT, "@complete")


def severity(value: str) -> dict[str, Any]:
    return {"type": "error_severity", "operator": "equals", "value": value}


def llm(key: str, prompt: str, *branches: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "name": key.title(),
        "actor": "writer",
        "prompt": prompt,
        "branches": [*branches, COMPLETE],
        **fields,
    }


def document(slug: str, steps_: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": slug,
        "inputs": {"request": {"type": "string", "required": True}},
        "actors": {"writer": "sev-writer", "classifier": "sev-classifier"},
        "steps": steps_,
    }


def start(recipe: Recipe, owner: Any) -> Run:
    inputs = {"request": "Where is my parcel?"}
    return drive(services.run_start(user=owner, recipe=recipe, inputs=inputs))


def test_a_reclassification_asks_the_classifier_again_with_the_failure(owner: Any) -> None:
    # The classifier picks billing, unless its question says billing failed: then shipping.
    told = r"(?s)The previous selection failed: .*the order has no invoice"
    ActorFactory(
        name="sev-classifier",
        config={
            "rules": [
                {"match": rf"(?s)route 'shipping'.*{told}", "reply": "yes"},
                {"match": rf"(?s)route 'billing'.*{told}", "reply": "no"},
                {"match": "route 'billing'", "reply": "yes"},
                {"match": "route 'shipping'", "reply": "no"},
            ]
        },
    )
    ActorFactory(
        name="sev-writer", config={"replies": ["@error: the order has no invoice", "Sent."]}
    )
    triage = {
        "key": "triage",
        "name": "Triage",
        "kind": "classify",
        "actor": "classifier",
        "prompt": "{request}",
        "routes": [{"name": "billing"}, {"name": "shipping"}],
        "branches": [
            branch("billing", 1, {"type": "route_selected", "value": "billing"}, "pay"),
            branch("shipping", 2, {"type": "route_selected", "value": "shipping"}, "send"),
        ],
    }
    wrong_route = branch("wrong_route", 1, severity("RECLASSIFICATION"), "triage")
    pay = llm("pay", "Bill it.", wrong_route, failure_severity="RECLASSIFICATION")
    recipe = publish_document(
        owner, document("sev-reclassify", [triage, pay, llm("send", "Send it.")])
    )

    run = start(recipe, owner)

    assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "completed")
    ran = list(run.steps.order_by("seq").values_list("step_key", "status"))
    assert ran == [
        ("triage", "succeeded"),
        ("pay", "failed"),
        ("triage", "succeeded"),
        ("send", "succeeded"),
    ]
    failed = run.steps.get(step_key="pay")
    [taken] = [e for e in failed.evaluations.all() if e.taken]
    assert (taken.branch, taken.reason) == (
        "wrong_route",
        "severity RECLASSIFICATION: the order has no invoice",
    )
    again = run.steps.get(seq=3)
    assert again.details["selected"] == ["shipping"]
    assert run.state["reclassified"] == {"triage": 1}


def test_a_replanning_goes_back_with_the_failure_in_the_planning_prompt(owner: Any) -> None:
    ActorFactory(name="sev-classifier", config={"replies": ["unused"]})
    ActorFactory(
        name="sev-writer",
        config={"replies": ["Plan A.", "@error: there is no database", "Plan B.", "Done."]},
    )
    replan = branch("replan", 1, severity("REPLANNING"), "plan")
    recipe = publish_document(
        owner,
        document(
            "sev-replan",
            [
                llm("plan", "Plan how to answer: {request} {feedback}", branches=[]),
                llm("execute", "Carry out the plan.", replan, failure_severity="REPLANNING"),
            ],
        ),
    )

    run = start(recipe, owner)

    assert run.status == RunStatus.SUCCEEDED
    plans = list(run.steps.filter(step_key="plan").order_by("seq").values_list("prompt", flat=True))
    assert plans == [
        "Plan how to answer: Where is my parcel? ",
        "Plan how to answer: Where is my parcel? step 'execute' failed: there is no database",
    ]
    assert steps(run)["execute"].response == "Done."


def test_a_transient_failure_is_retriable(owner: Any) -> None:
    ActorFactory(name="sev-classifier", config={"replies": ["unused"]})
    ActorFactory(name="sev-writer", config={"replies": ["@timeout", "Fine."]})
    again = branch("again", 1, severity("RETRIABLE"), "@repeat", params={"max_retries": 1})
    recipe = publish_document(
        owner,
        document("sev-retry", [llm("answer", "Answer.", again, failure_severity="REPLANNING")]),
    )

    run = start(recipe, owner)

    assert run.status == RunStatus.SUCCEEDED
    first, second = run.steps.order_by("seq")
    assert (first.status, first.details.get("transient")) == ("timed_out", True)
    [taken] = [e for e in first.evaluations.all() if e.taken]
    assert taken.reason.startswith("severity RETRIABLE: ")
    assert (second.response, second.details.get("transient")) == ("Fine.", None)


def test_a_fork_at_the_replanned_step_sends_it_the_failure_again(owner: Any) -> None:
    ActorFactory(name="sev-classifier", config={"replies": ["unused"]})
    ActorFactory(
        name="sev-writer",
        config={"replies": ["Plan A.", "@error: there is no database", "Plan B.", "Done."]},
    )
    replan = branch("replan", 1, severity("REPLANNING"), "plan")
    recipe = publish_document(
        owner,
        document(
            "sev-replan-fork",
            [
                llm("plan", "Plan: {feedback}", branches=[]),
                llm("execute", "Carry out the plan.", replan, failure_severity="REPLANNING"),
            ],
        ),
    )
    run = start(recipe, owner)

    fork = drive(reruns.run_fork(user=owner, run=run, at_seq=3))

    assert fork.status == RunStatus.SUCCEEDED
    replanned = fork.steps.get(seq=3)
    assert replanned.prompt == "Plan: step 'execute' failed: there is no database"
    assert fork.state["replans"] == {"execute": {"replan": 1}}


def test_a_server_error_after_the_providers_retries_is_retriable(
    owner: Any, stub_server: StubServer, settings: Any
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    ActorFactory(name="sev-classifier", config={"replies": ["unused"]})
    stub_actor(stub_server, "sev-writer")
    # The provider tries 4 times (3 retries) before the step fails; then the branch retries it.
    stub_server.enqueue(*[error(503, "overloaded")] * 4, reply("Fine."))
    again = branch("again", 1, severity("RETRIABLE"), "@repeat", params={"max_retries": 1})
    recipe = publish_document(owner, document("sev-503", [llm("answer", "Answer.", again)]))

    run = start(recipe, owner)

    assert run.status == RunStatus.SUCCEEDED
    first, second = run.steps.order_by("seq")
    assert (first.status, first.details.get("transient")) == ("failed", True)
    [taken] = [e for e in first.evaluations.all() if e.taken]
    assert taken.reason.startswith("severity RETRIABLE: ")
    assert second.response == "Fine."
