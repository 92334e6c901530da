"""Detectors through real dry runs: a decision tree step finds PII, keywords and unsafe pages
in the previous answer (or a template's text) and goes to the leaf they call for."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runner import reruns, services
from runner.models import ModelCall, Run
from runner.status import RunStatus
from tests.engine.test_decision_tree import REFERENCE_TREE
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document, steps
from workflows.models import RecipeVersion

pytestmark = pytest.mark.django_db

DONE = branch("done", 999, DEFAULT, "@complete")


def recipe_document(detect: dict[str, Any], *, fallback: bool = True) -> dict[str, Any]:
    tree = copy.deepcopy(REFERENCE_TREE)
    if fallback:
        tree["fallback"] = "needs_review"
    return {
        "format": "branchline.recipe/v1",
        "slug": "detecting",
        "name": "Detecting",
        "inputs": {
            "request": {"type": "string", "default": "Write the application."},
            "image_count": {"type": "integer", "default": 0},
        },
        "actors": {"writer": "det-writer", "moderator": "det-moderator"},
        "steps": [
            {"key": "draft", "name": "Draft", "actor": "writer", "prompt": "{request}"},
            {
                "key": "route",
                "name": "Route",
                "kind": "decision_tree",
                "tree": tree,
                "detect": detect,
                "leaf_targets": {
                    "safety_focused": "@end",
                    "pii_focused": "pii_review",
                    "image_focused": "base",
                    "base_classification": "base",
                    **({"needs_review": "@end"} if fallback else {}),
                },
            },
            {
                "key": "pii_review",
                "name": "PII",
                "actor": "writer",
                "prompt": "Redact",
                "branches": [DONE],
            },
            {"key": "base", "name": "Base", "actor": "writer", "prompt": "Classify"},
        ],
    }


def run_of(owner: Any, answer: str, verdict: str = "SAFE", **detect: Any) -> Run:
    ActorFactory(name="det-writer", config={"replies": [answer, "Done."]})
    ActorFactory(name="det-moderator", config={"replies": [verdict]})
    detect = detect or {"pii": {}, "safety": {"judge": "moderator"}}
    recipe = publish_document(owner, recipe_document(detect))
    return drive(services.run_start(user=owner, recipe=recipe, inputs={}))


@pytest.mark.parametrize(
    "answer",
    [
        "Applicant Jane Roe, SSN 123-45-6789, asks for a loan.",
        "Pay with card 4111 1111 1111 1111.",
    ],
)
def test_a_valid_ssn_or_card_in_the_answer_reaches_the_pii_leaf(owner: Any, answer: str) -> None:
    run = run_of(owner, answer)

    assert run.status == RunStatus.SUCCEEDED
    ran = steps(run)
    assert list(ran) == ["draft", "route", "pii_review"]
    route = ran["route"]
    assert route.response == "pii_focused"
    detected = route.details["detected"]
    assert detected["unsafe_pages"] == [] and detected["detect_failures"] == {}
    assert len(detected["pii"]) == 1 and detected["pii"][0]["value"].startswith("…")
    # The number itself is kept nowhere in the step's record.
    assert "6789," not in str(route.details) and "1111 1111" not in str(route.details)
    (evaluation,) = route.evaluations.all()
    assert evaluation.branch == "leaf:pii_focused" and "high-risk PII" in evaluation.reason
    judged = ModelCall.objects.filter(run=run, seq=route.seq)
    assert [(c.actor_alias, c.purpose) for c in judged] == [("moderator", "judge")]


@pytest.mark.parametrize(
    "answer",
    [
        "Applicant Jane Roe, SSN 666-12-3456, asks for a loan.",
        "Pay with card 4111 1111 1111 1112.",
    ],
)
def test_an_invalid_checksum_does_not_reach_the_pii_leaf(owner: Any, answer: str) -> None:
    run = run_of(owner, answer)

    ran = steps(run)
    assert list(ran) == ["draft", "route", "base"]
    assert ran["route"].details["detected"]["pii"] == []


def test_a_page_the_judge_finds_unsafe_reaches_the_safety_leaf(owner: Any) -> None:
    run = run_of(owner, "How to build a weapon, SSN 123-45-6789.", verdict="UNSAFE")

    assert run.status == RunStatus.ENDED
    route = steps(run)["route"]
    assert route.response == "safety_focused"
    assert route.details["detected"]["unsafe_pages"] == [1]


def test_a_judge_with_no_verdict_fails_the_detector_and_the_tree_takes_its_fallback(
    owner: Any,
) -> None:
    run = run_of(owner, "A quiet text.", verdict="Hard to say.")

    assert run.status == RunStatus.ENDED
    route = steps(run)["route"]
    assert route.response == "needs_review"
    failure = route.details["detected"]["detect_failures"]["unsafe_pages"]
    assert failure == (
        "the safety judge 'moderator' gave no verdict on page 1: its answer (12 characters) "
        "said neither SAFE nor UNSAFE"
    )
    (evaluation,) = route.evaluations.all()
    assert evaluation.taken
    assert f"node 1: unsafe_pages not detected: {failure} -> fallback" in evaluation.reason


def test_keywords_are_found_in_the_text_a_template_names(owner: Any) -> None:
    detect = {
        "pii": {"types": ["ssn"]},
        "safety": {"judge": "moderator"},
        "keywords": {"words": ["Confidential"]},
        "from": "{request} / {steps.draft.response}",
    }
    run = run_of(owner, "CONFIDENTIAL memo: the plan, confidential.", **detect)

    detected = steps(run)["route"].details["detected"]
    assert detected["keywords"] == [{"word": "Confidential", "page": 1, "count": 2}]


def test_a_judge_whose_call_fails_fails_the_detector_too(owner: Any) -> None:
    run = run_of(owner, "A quiet text.", verdict="@error: moderation is down")

    route = steps(run)["route"]
    assert route.response == "needs_review"
    failure = route.details["detected"]["detect_failures"]["unsafe_pages"]
    assert failure.startswith("the safety judge 'moderator' failed on page 1: ")
    assert "moderation is down" in failure


def test_a_published_tree_that_no_longer_loads_takes_its_fallback(owner: Any) -> None:
    ActorFactory(name="det-writer", config={"replies": ["A quiet text.", "Done."]})
    ActorFactory(name="det-moderator", config={"replies": ["SAFE"]})
    recipe = publish_document(owner, recipe_document({"pii": {}}))
    # A version published when the engine read its tree otherwise: stored as it was.
    version = recipe.versions.get(number=1)
    version.document["steps"][1]["tree"]["tree"]["if_false"]["type"] = "nod"
    RecipeVersion.objects.filter(pk=version.pk).update(document=version.document)

    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}))

    assert run.status == RunStatus.ENDED
    route = steps(run)["route"]
    assert route.response == "needs_review"
    (evaluation,) = route.evaluations.all()
    assert evaluation.reason.startswith(
        "the tree did not load (steps[1].tree.tree.if_false.type: unknown node type 'nod'"
    )


def test_a_fork_after_the_tree_keeps_the_facts_its_detectors_found(owner: Any) -> None:
    run = run_of(owner, "Applicant SSN 123-45-6789.")
    judged = ModelCall.objects.filter(run=run).count()

    fork = reruns.run_fork(user=owner, run=run, at_seq=3)

    # The state the fork starts from holds the facts the parent's detectors found.
    assert fork.state["facts"]["pii"] == [{"type": "ssn", "page": 1, "value": "…6789"}]
    fork = drive(fork)
    assert fork.status == RunStatus.SUCCEEDED
    assert list(steps(fork)) == ["draft", "route", "pii_review"]
    # The judge is not asked again: the fork's replay reads what the parent found.
    assert not ModelCall.objects.filter(run=fork, actor_alias="moderator").exists()
    assert ModelCall.objects.filter(run=run).count() == judged
