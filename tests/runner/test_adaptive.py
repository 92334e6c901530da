"""Adaptive mode in real runs: the intent's expected format checked by format_matches, the
progress record that stops a loop once every criterion has been met, and strategies learned
per intent pattern, shown as `{learned_strategies}` and shared by an owner's recipes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner import services
from runner.models import Run
from runner.status import RunStatus
from tests.factories import ActorFactory, UserFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document, steps
from workflows.models import Recipe

pytestmark = pytest.mark.django_db

INTENT = {
    "intent": "List the first ten primes",
    "dataType": "numbers",
    "expectedFormat": "raw_data",
    "successCriteria": ["ten numbers", "all prime"],
    "qualityRequirements": {"accuracy": 0.95},
}
PRIMES = "2, 3, 5, 7, 11, 13, 17, 19, 23, 29"
CODE = "```python\nprint([p for p in range(30) if is_prime(p)])\n```"
ASK_FOR_DATA = "Deliver the numbers themselves, not code that computes them."
ALL_MET = {
    "type": "criteria_met",
    "operator": "all",
    "intent_step": "understand",
    "evaluator": "judge",
}


def verdicts(*met: bool) -> str:
    items = [{"n": n, "met": yes, "why": "seen"} for n, yes in enumerate(met, 1)]
    return f"Score: {sum(met)}\n" + json.dumps({"criteria": items})


@pytest.fixture
def models(db: None) -> None:
    for name in ("a-analyst", "a-writer", "a-judge"):
        ActorFactory(name=name, config={"replies": ["unused"]})


def adaptive(owner: Any, slug: str, prompt: str, *branches: Any, share: bool = True) -> Recipe:
    doc: dict[str, Any] = {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": slug,
        "inputs": {"request": {"type": "string", "required": True}},
        "actors": {"analyst": "a-analyst", "writer": "a-writer", "judge": "a-judge"},
        "steps": [
            {
                "key": "understand",
                "name": "Understand",
                "kind": "intent",
                "actor": "analyst",
                "prompt": "{request}",
            },
            {
                "key": "deliver",
                "name": "Deliver",
                "actor": "writer",
                "prompt": prompt,
                "branches": list(branches),
            },
        ],
    }
    if share:
        doc["learning"] = {"share": True}
    return publish_document(owner, doc)


def run(owner: Any, recipe: Recipe, script: dict[str, list[str]]) -> Run:
    started = services.run_start(
        user=owner, recipe=recipe, inputs={"request": "the first ten primes"}, script=script
    )
    return drive(started)


def format_recipe(owner: Any, slug: str, share: bool = True) -> Recipe:
    wrong_form = {"type": "format_matches", "operator": "is_not", "intent_step": "understand"}
    return adaptive(
        owner,
        slug,
        "{request}\n\n{learned_strategies}",
        branch(
            "not_data",
            1,
            wrong_form,
            "@repeat",
            action="ENHANCE_PROMPT",
            counts_as="failure",
            params={"prompt_enhancement": ASK_FOR_DATA, "max_retries": 1},
        ),
        branch("delivered", 2, DEFAULT, "@complete", action="QUALITY_APPROVED"),
        share=share,
    )


def test_format_matches_asks_for_data_when_code_came_and_the_intent_keeps_its_format(
    owner: Any, models: None
) -> None:
    recipe = format_recipe(owner, "primes-format")
    done = run(owner, recipe, {"analyst": [json.dumps(INTENT)], "writer": [CODE, PRIMES]})
    assert done.status == RunStatus.SUCCEEDED, done.error
    understand = done.steps.get(step_key="understand")
    read = json.loads(understand.response)
    assert read["expected_format"] == "raw_data"
    assert read["quality_requirements"] == {"accuracy": 0.95}
    first, second = done.steps.filter(step_key="deliver").order_by("attempt", "seq")
    [not_data] = first.evaluations.all()
    assert not_data.taken
    assert "the answer is code, not raw data" in not_data.reason
    assert "(expected by 'understand': \"raw_data\")" in not_data.reason
    assert second.response == PRIMES
    assert second.intent_pattern == "numbers/raw_data"
    # Nothing was learned before this run: the template name is empty.
    assert "Strategies" not in first.prompt


def test_a_strategy_learned_for_an_intent_pattern_is_shown_to_the_owners_sharing_recipes(
    owner: Any, models: None
) -> None:
    script = {"analyst": [json.dumps(INTENT)], "writer": [CODE, PRIMES]}
    first = run(owner, format_recipe(owner, "primes-a"), script)
    assert first.status == RunStatus.SUCCEEDED, first.error

    other = format_recipe(owner, "primes-b")
    later = run(owner, other, {"analyst": [json.dumps(INTENT)], "writer": [PRIMES]})
    assert later.status == RunStatus.SUCCEEDED, later.error
    prompt = steps(later)["deliver"].prompt
    assert "Strategies that worked before for requests like this one:" in prompt
    assert f"- {ASK_FOR_DATA}" in prompt

    # Another kind of request: its pattern has learned nothing.
    essay = {**INTENT, "dataType": "essay", "expectedFormat": "prose"}
    unlike = run(owner, other, {"analyst": [json.dumps(essay)], "writer": [PRIMES]})
    assert "Strategies" not in steps(unlike)["deliver"].prompt


def test_strategies_stay_with_their_recipe_unless_both_share_and_never_cross_owners(
    owner: Any, models: None
) -> None:
    script = {"analyst": [json.dumps(INTENT)], "writer": [CODE, PRIMES]}
    assert run(owner, format_recipe(owner, "primes-a"), script).status == RunStatus.SUCCEEDED
    once = {"analyst": [json.dumps(INTENT)], "writer": [PRIMES]}

    private = format_recipe(owner, "primes-private", share=False)
    assert "Strategies" not in steps(run(owner, private, once))["deliver"].prompt

    stranger = UserFactory(username="sam")
    theirs = format_recipe(stranger, "primes-theirs")
    assert "Strategies" not in steps(run(stranger, theirs, once))["deliver"].prompt

    # The recipe that learned it sees it, sharing or not.
    own = format_recipe(owner, "primes-own", share=False)
    assert run(owner, own, script).status == RunStatus.SUCCEEDED
    assert ASK_FOR_DATA in steps(run(owner, own, once))["deliver"].prompt


def test_a_loop_stops_once_every_criterion_has_been_met_across_its_answers(
    owner: Any, models: None
) -> None:
    recipe = adaptive(
        owner,
        "primes-progress",
        "{request}",
        branch("done", 1, ALL_MET, "@complete", action="QUALITY_APPROVED"),
        branch(
            "more",
            2,
            DEFAULT,
            "@repeat",
            action="REQUEST_MORE_DETAIL",
            params={"retry_suffix": "Go on.", "max_retries": 3},
        ),
    )
    script = {
        "analyst": [json.dumps(INTENT)],
        "writer": ["2, 3, 5", PRIMES],
        "judge": [verdicts(False, True), verdicts(True, False)],
    }
    done = run(owner, recipe, script)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.outcome == "approved"
    delivered = list(done.steps.filter(step_key="deliver").order_by("seq"))
    assert len(delivered) == 2
    [taken] = delivered[1].evaluations.filter(taken=True)
    assert taken.branch == "done"
    assert taken.reason == (
        "2/2 criteria met (needs all): 1. 'ten numbers' met (seen); 2. 'all prime' met earlier "
        "(seen)"
    )
    assert done.state["progress"]["understand"] == {
        "criteria": ["ten numbers", "all prime"],
        "met": [True, True],
    }
