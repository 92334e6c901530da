"""Each step's record carries its phases (sources, tools, build, call, validate, finalise),
each with its duration and status, the number of attempts and the step's duration: in the
details, in the runs API and on the run monitor's step card."""

from __future__ import annotations

from typing import Any

import pytest

from runner import services
from runner.models import StepRun
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document, steps
from workflows.models import Recipe

pytestmark = pytest.mark.django_db

HIT = {"document": "Guide", "heading": "Lamps", "text": "Lit at dusk.", "score": 0.9}
LOW = '{"relevance": 5, "helpfulness": 5, "accuracy": 5, "completeness": 5, "feedback": "More."}'
HIGH = '{"relevance": 25, "helpfulness": 25, "accuracy": 25, "completeness": 25, "feedback": ""}'


@pytest.fixture
def models(db: None) -> None:
    ActorFactory(name="x-writer", config={"replies": ["unused"]})
    ActorFactory(name="x-judge", config={"replies": ["unused"]})


def publish(owner: Any, **answer: Any) -> Recipe:
    step = {
        "key": "answer",
        "name": "Answer",
        "actor": "writer",
        "prompt": "Answer {question} from these sources:\n{sources}",
        "sources": [{"knowledge_base": "docs"}],
        "validation": {"threshold": 0.5, "max_attempts": 2, "judge": "judge", "fallback": "?"},
        "branches": [branch("done", 1, DEFAULT, "@complete")],
        **answer,
    }
    document = {
        "format": "branchline.recipe/v1",
        "slug": "phases",
        "name": "Phases",
        "inputs": {"question": {"type": "string", "required": True}},
        "actors": {"writer": "x-writer", "judge": "x-judge"},
        "steps": [step],
    }
    return publish_document(owner, document)


def start(owner: Any, recipe: Recipe, script: dict[str, Any]) -> Any:
    run = services.run_start(
        user=owner, recipe=recipe, inputs={"question": "When is it lit?"}, script=script
    )
    return drive(run)


def test_the_api_shows_each_phase_of_an_llm_step_with_sources_and_validation(
    owner: Any, models: None, client: Any
) -> None:
    recipe = publish(owner)
    script = {
        "sources.answer": [[HIT]],
        "writer": ["Vague.", "It is lit at dusk [1], every evening."],
        "judge": [LOW, HIGH],
    }
    run = start(owner, recipe, script)
    assert run.status == "succeeded", run.error
    client.force_login(owner)

    (shown,) = client.get(f"/api/runs/{run.pk}/").json()["steps"]

    phases = shown["execution_steps"]
    assert [p["name"] for p in phases] == ["sources", "build", "call", "validate", "finalise"]
    assert all(p["status"] == "ok" for p in phases), (phases, shown["details"])
    assert all(isinstance(p["duration_ms"], int) and p["duration_ms"] >= 0 for p in phases)
    # The judge's low score asked the writer again: two answers.
    assert shown["execution_attempts"] == 2
    assert shown["duration_ms"] >= sum(p["duration_ms"] for p in phases) - len(phases)
    assert shown["details"]["execution"]["steps"] == phases


def test_a_failed_call_is_a_failed_phase(owner: Any, models: None) -> None:
    recipe = publish(owner, sources=None, validation=None, timeout_s=1)
    run = start(owner, recipe, {"writer": ["@error: the server said no"]})

    record = steps(run)["answer"].details["execution"]
    statuses = {p["name"]: p["status"] for p in record["steps"]}
    assert statuses == {"build": "ok", "call": "failed", "finalise": "ok"}
    assert record["attempts"] == 1


def test_a_step_of_another_kind_has_one_call_phase(owner: Any, models: None) -> None:
    document = {
        "format": "branchline.recipe/v1",
        "slug": "sets",
        "name": "Sets",
        "steps": [
            {
                "key": "set",
                "name": "Set",
                "kind": "transform",
                "set": {"n": "`1`"},
                "branches": [branch("done", 1, DEFAULT, "@complete")],
            }
        ],
    }
    run = drive(services.run_start(user=owner, recipe=publish_document(owner, document), inputs={}))

    record = steps(run)["set"].details["execution"]
    assert [p["name"] for p in record["steps"]] == ["call", "finalise"]
    assert record["attempts"] == 1


def test_the_monitor_renders_the_phases_escaped(owner: Any, models: None, client: Any) -> None:
    recipe = publish(owner)
    run = start(
        owner, recipe, {"sources.answer": [[HIT]], "writer": ["Lit at dusk [1]."], "judge": [HIGH]}
    )
    step = run.steps.get()
    # A record as it could be read back: what the card shows of it is escaped.
    execution = step.details["execution"]
    execution["steps"].append({"name": "<b>odd</b>", "status": "ok", "duration_ms": 3})
    StepRun.objects.filter(pk=step.pk).update(details={**step.details, "execution": execution})
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/").content.decode()

    assert 'aria-label="Execution steps"' in page
    for name in ("sources", "build", "call", "validate", "finalise"):
        assert f'<span class="phase-name">{name}</span>' in page
    assert "&lt;b&gt;odd&lt;/b&gt;" in page and "<b>odd</b>" not in page
    assert f"<dd>{execution['duration_ms']} ms</dd>" in page
