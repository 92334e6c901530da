"""What the tests of resuming and forking runs share: recipes, runs driven in this process,
and what is read back of them."""

from __future__ import annotations

from typing import Any

from django.forms.models import model_to_dict

from runner import services
from runner.models import BranchEvaluation, ModelCall, Run, RunEvent
from tests.factories import ActorFactory, chain_document
from tests.runner.conftest import STORY
from tests.runner.recipes import drive
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

DOWN = "@error: the model server is down"


def steps_of(run: Run) -> list[tuple[int, str, int, str]]:
    return [(s.seq, s.step_key, s.attempt, s.status) for s in run.steps.order_by("seq", "attempt")]


def taken(run: Run) -> list[str]:
    return list(
        BranchEvaluation.objects.filter(step_run__run=run, taken=True)
        .order_by("step_run__seq")
        .values_list("branch", flat=True)
    )


def answers_asked(run: Run) -> list[tuple[int, str]]:
    """The calls the run made to models for its steps' answers: (seq, alias)."""
    calls = ModelCall.objects.filter(run=run, purpose=ModelCall.Purpose.ANSWER)
    return list(calls.order_by("seq", "started_at").values_list("seq", "actor_alias"))


def snapshot(run: Run) -> dict[str, Any]:
    """Everything of a run that a fork must leave as it was."""
    run.refresh_from_db()
    return {
        "run": model_to_dict(run),
        "steps": [model_to_dict(s) for s in run.steps.order_by("seq", "attempt")],
        "evaluations": [
            model_to_dict(e) for e in BranchEvaluation.objects.filter(step_run__run=run)
        ],
        "events": list(RunEvent.objects.filter(run=run).order_by("seq").values("seq", "type")),
        "calls": ModelCall.objects.filter(run=run).count(),
    }


def make_chain(owner: Any) -> Recipe:
    """Publish three llm steps s1 → s2 → s3 by `writer`; `backup` is another model alias."""
    ActorFactory(name="chain-writer", config={"replies": ["a part of the story"]})
    ActorFactory(name="chain-backup", config={"replies": ["the backup's part"]})
    document = chain_document(slug="chain", actor="chain-writer", steps=3, branches=[])
    document["actors"]["backup"] = "chain-backup"
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def failed_chain(chain: Recipe, owner: Any) -> Run:
    """A dry run of the chain whose third step fails (the model server is down)."""
    script = {"writer": ["part one", "part two", DOWN, "part three"]}
    run = services.run_start(user=owner, recipe=chain, inputs={"topic": "owls"}, script=script)
    return drive(run)


def reviewed_story(story_recipe: Recipe, owner: Any, editors: str) -> Run:
    """A dry run of the story: the judge sends it to review, the editors decide `editors`."""
    script = {
        "writer": [STORY, "A revised story in which a dragon guards the lighthouse."],
        "judge": ["4"],
        "editors": [editors],
    }
    run = services.run_start(
        user=owner, recipe=story_recipe, inputs={"topic": "sea"}, script=script
    )
    return drive(run)
