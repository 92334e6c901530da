"""The admin shows each actor's figures per step, aggregated from the runs' StepRuns."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from runner.models import Run, StepRun
from runner.status import RunStatus, StepStatus
from workflows.models import Recipe
from workflows.services import recipe_publish

pytestmark = pytest.mark.django_db


def test_the_admin_shows_actor_statistics_from_step_runs(
    superuser: Any, user: Any, recipe: Recipe
) -> None:
    version = recipe_publish(recipe=recipe, user=user)
    run = Run.objects.create(
        recipe=recipe, version=version, created_by=user, status=RunStatus.SUCCEEDED
    )
    history = [("writer", StepStatus.SUCCEEDED, 300), ("writer", StepStatus.FAILED, 100)]
    history += [("judge", StepStatus.SUCCEEDED, 50)]
    StepRun.objects.bulk_create(
        StepRun(
            run=run,
            seq=seq,
            step_key="draft",
            step_name="Draft",
            kind="llm",
            actor_alias=alias,
            status=status,
            latency_ms=latency,
        )
        for seq, (alias, status, latency) in enumerate(history, start=1)
    )
    StepRun.objects.create(  # a human step is no actor statistic
        run=run, seq=4, step_key="review", kind="human", actor_alias="editors", status="decided"
    )
    client = Client()
    client.force_login(superuser)

    response = client.get("/admin/runner/actorstatistic/", {"recipe": recipe.pk})

    assert response.status_code == 200
    rows = [
        (r["step_key"], r["actor_alias"], r["successes"], r["attempts"], r["mean_latency"])
        for r in response.context["rows"]
    ]
    assert rows == [("draft", "judge", 1, 1, "50"), ("draft", "writer", 1, 2, "200")]
    assert "50%" in response.content.decode()
    assert client.get("/admin/runner/").status_code == 200
