"""Actor rows and versions written before today's checks fail a run with a readable reason."""

from __future__ import annotations

from typing import Any

import pytest

from runner import advance, services
from runner.actors import ResolvedActor, provider_for
from runner.providers import ProviderConfigError
from runner.status import RUNNABLE
from tests.factories import ActorFactory, recipe_document
from workflows.models import Actor, Recipe, RecipeVersion
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.django_db

NAME = "legacy-model"


@pytest.fixture
def legacy_recipe(owner: Any, editors: Any) -> Recipe:
    """A published one-step recipe whose writer is the actor `legacy-model`."""
    ActorFactory(name=NAME, openai=True)
    document = recipe_document(slug="legacy", actors={"writer": NAME})
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def drive(run: Any) -> Any:
    """Execute the run's steps in this process until it stops."""
    for _ in range(20):
        run.refresh_from_db()
        if run.status not in RUNNABLE:
            return run
        advance.advance(run.pk, time_slice=60)
    raise AssertionError(f"run {run.pk} did not stop: {run.status}")


@pytest.mark.parametrize(
    ("row", "error"),
    [
        (
            {"base_url": "https://admin:hunter2@llm.example.com/v1"},
            "actor 'legacy-model' cannot run: base_url: must not contain credentials; "
            "put the key in the env var named by api_key_env",
        ),
        (
            {"base_url": "http://169.254.169.254/latest"},
            "actor 'legacy-model' cannot run: base_url: refused: 169.254.169.254, a link-local "
            "address (cloud metadata services live there); add it to PROVIDER_URL_ALLOWLIST to "
            "allow it",
        ),
        (
            {"model": ""},
            "actor 'legacy-model' cannot run: model: an openai actor needs the name of the model "
            "to call",
        ),
        (
            {"timeout_s": 0},
            "actor 'legacy-model' cannot run: timeout_s: must be a whole number of seconds from "
            "1 to 3600",
        ),
        (
            {
                "provider": "scripted",
                "base_url": "",
                "api_key_env": "",
                "config": {"rules": [{"match": "(", "reply": "x"}]},
            },
            "actor 'legacy-model' cannot run: config.rules[0].match: invalid regex: missing ): (",
        ),
        (
            {"kind": "human", "provider": ""},
            "actor 'legacy-model' is a reviewer group, not a model: it cannot answer a prompt",
        ),
    ],
)
def test_a_step_whose_actor_row_cannot_run_fails_with_the_reason(
    legacy_recipe: Recipe, owner: Any, editors: Any, row: dict[str, Any], error: str
) -> None:
    if row.get("kind") == "human":
        row["group"] = editors
    Actor.objects.filter(name=NAME).update(**row)  # as rows were written before the checks

    run = drive(services.run_start(user=owner, recipe=legacy_recipe, inputs={"topic": "owls"}))

    assert run.status == "failed"
    step = run.steps.get()
    assert (step.status, step.error, step.actor_alias) == ("failed", error, "writer")
    assert "hunter2" not in str(list(run.events.values_list("data", flat=True)))


def test_a_dry_run_does_not_need_the_actor_row_to_run(legacy_recipe: Recipe, owner: Any) -> None:
    Actor.objects.filter(name=NAME).update(model="")

    run = services.run_start(
        user=owner, recipe=legacy_recipe, inputs={"topic": "owls"}, script={"writer": ["A tale."]}
    )

    assert drive(run).status == "succeeded"


def test_a_reviewer_group_asked_for_an_answer_is_a_provider_error() -> None:
    group = ResolvedActor(alias="editors", name="@human:editors", is_human=True, group_id=1)

    with pytest.raises(ProviderConfigError, match="is a reviewer group, not a model"):
        provider_for(group)


def test_a_version_published_before_the_regex_bounds_cannot_start(
    legacy_recipe: Recipe, owner: Any
) -> None:
    document = dict(legacy_recipe.versions.get().document)
    step = dict(document["steps"][0])
    step["branches"] = [
        {
            "name": "huge",
            "priority": 1,
            "when": {"type": "pattern_match", "operator": "regex_match", "value": "a" * 100_000},
            "action": "END_RECIPE",
            "target": "@end",
        }
    ]
    document["steps"] = [step]
    RecipeVersion.objects.create(recipe=legacy_recipe, number=2, document=document)

    with pytest.raises(services.RunNotStartable) as refused:
        services.run_start(user=owner, recipe=legacy_recipe, inputs={"topic": "owls"})

    assert str(refused.value) == (
        "version: v2 of 'legacy' cannot run: steps[0].branches[0].when.value: pattern is "
        "100000 characters, at most 2000"
    )
