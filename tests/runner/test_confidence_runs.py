"""Confidence as note 001 reckons it, through real dry runs: a judge total of 65 no longer
passes the default threshold, a recipe's `validation` defaults its steps, and the monitor
shows each attempt's arithmetic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from runner import services
from runner.models import Run
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document

pytestmark = pytest.mark.django_db

ANSWER = "Owls hunt at night and fly without a sound."
FALLBACK = "No good answer this time."


def verdict(total: int) -> str:
    keys = ("relevance", "helpfulness", "accuracy", "completeness")
    return json.dumps({**dict.fromkeys(keys, total / 4), "feedback": "Say more."})


def times(text: str) -> str:
    return text.replace(" x ", " \u00d7 ")


def run_with(owner: Any, judge_total: int, **recipe_fields: Any) -> Run:
    ActorFactory(name="cf-writer", config={"replies": ["unused"]})
    ActorFactory(name="cf-judge", config={"replies": ["unused"]})
    validation = {"max_attempts": 1, "judge": "judge", "fallback": FALLBACK}
    recipe = publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "confidence",
            "name": "Confidence",
            "inputs": {},
            "actors": {"writer": "cf-writer", "judge": "cf-judge"},
            "steps": [
                {
                    "key": "answer",
                    "name": "Answer",
                    "actor": "writer",
                    "prompt": "Explain owls.",
                    "validation": validation,
                    "branches": [branch("end", 999, DEFAULT, "@complete")],
                }
            ],
            **recipe_fields,
        },
    )
    script = {"writer": [ANSWER], "judge": [verdict(judge_total)]}
    return drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=script))


def test_a_judge_total_of_65_no_longer_passes_and_the_monitor_shows_why(owner: Any) -> None:
    run = run_with(owner, 65)
    step = run.steps.get()

    assert (step.response, step.confidence) == (FALLBACK, pytest.approx(0.605))
    [attempt] = step.details["validation"]["attempts"]
    assert attempt["judge_total"] == 65
    assert attempt["arithmetic"] == times("0.3 x 0.50 + 0.7 x 0.65 = 0.60 < 0.75")
    assert step.details["validation"]["scoring"] == {
        "threshold": 0.75,
        "rule_base": 0.5,
        "rule_weight": 0.3,
        "judge_weight": 0.7,
    }
    web = Client()
    web.force_login(owner)
    page = web.get(reverse("run-monitor", args=[run.pk])).content.decode()
    assert times("confidence 0.3 x 0.50 + 0.7 x 0.65 = 0.60 &lt; 0.75") in page


def test_the_recipes_validation_sets_its_steps_threshold(owner: Any) -> None:
    run = run_with(owner, 65, validation={"threshold": 0.6})
    step = run.steps.get()

    assert (step.response, step.confidence) == (ANSWER, pytest.approx(0.605))
    [attempt] = step.details["validation"]["attempts"]
    assert attempt["arithmetic"] == times("0.3 x 0.50 + 0.7 x 0.65 = 0.60 ≥ 0.6")


def test_a_run_stored_under_the_old_rule_scale_shows_as_recorded(owner: Any) -> None:
    run = run_with(owner, 100)
    step = run.steps.get()
    # As a run made before note 001's reckoning stored it: no arithmetic, rules 0-1.
    step.details["validation"] = {
        "used_fallback": False,
        "attempts": [{"response": ANSWER, "rule_score": 1.0, "confidence": 1.0, "feedback": "-"}],
    }
    step.confidence = 1.0
    step.save()
    web = Client()
    web.force_login(owner)
    page = web.get(reverse("run-monitor", args=[run.pk])).content.decode()
    assert "confidence 1.00, rule score 1.00 (0 to 1 scale)" in page


def test_every_step_validates_a_step_that_names_no_validation(owner: Any) -> None:
    ActorFactory(name="cf-writer", config={"replies": ["unused"]})
    ActorFactory(name="cf-judge", config={"replies": ["unused"]})
    every = {"every_step": True, "max_attempts": 1, "judge": "judge", "fallback": FALLBACK}
    recipe = publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "every-step",
            "name": "Every step",
            "inputs": {},
            "actors": {"writer": "cf-writer", "judge": "cf-judge"},
            "validation": every,
            "steps": [
                {
                    "key": "answer",
                    "name": "Answer",
                    "actor": "writer",
                    "prompt": "Explain owls.",
                    "branches": [branch("end", 999, DEFAULT, "@complete")],
                }
            ],
        },
    )
    script = {"writer": [ANSWER], "judge": [verdict(65)]}
    run = drive(services.run_start(user=owner, recipe=recipe, inputs={}, script=script))

    step = run.steps.get()
    assert (step.response, step.confidence) == (FALLBACK, pytest.approx(0.605))
    assert step.details["validation"]["used_fallback"] is True
