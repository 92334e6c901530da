"""What the runner's tests of recipe runs share: branches written short, recipes published,
actors of the stub model server, runs driven in this process, and their steps read back."""

from __future__ import annotations

from typing import Any

from runner import advance
from runner.models import Run, StepRun
from runner.status import RUNNABLE
from tests.factories import ActorFactory
from tests.runner.providers.stub_server import StubServer
from workflows.models import Actor, Recipe
from workflows.services import recipe_import, recipe_publish

DEFAULT = {"type": "default"}


def branch(
    name: str, priority: int, when: dict[str, Any], target: str, **fields: Any
) -> dict[str, Any]:
    """Return a branch of a recipe document; its action is CONTINUE unless `action` says."""
    return {
        "name": name,
        "priority": priority,
        "when": when,
        "action": fields.pop("action", "CONTINUE"),
        "target": target,
        **fields,
    }


def publish_document(owner: Any, document: dict[str, Any]) -> Recipe:
    """Import a recipe document as `owner` and publish it."""
    recipe = recipe_import(user=owner, data=document).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def stub_actor(stub_server: StubServer, name: str, **fields: Any) -> Actor:
    """Create an actor of the stub's OpenAI-compatible model (`model` and the rest in `fields`).

    The test allows the stub's address (`settings.PROVIDER_URL_ALLOWLIST`).
    """
    fields = {"model": "stub-1", "api_key_env": "", "timeout_s": 5, **fields}
    return ActorFactory(
        name=name,
        provider=Actor.Provider.OPENAI,
        base_url=stub_server.base_url,
        config={},
        **fields,
    )


def drive(run: Run) -> Run:
    """Execute the run's steps in this process until it stops (or waits for a reviewer)."""
    for _ in range(50):
        run.refresh_from_db()
        if run.status not in RUNNABLE:
            return run
        advance.advance(run.pk, time_slice=60)
    raise AssertionError(f"run {run.pk} did not stop: {run.status}")


def steps(run: Run) -> dict[str, StepRun]:
    """Return the run's steps by key (of a step that ran again, its later run)."""
    return {s.step_key: s for s in run.steps.order_by("seq")}
