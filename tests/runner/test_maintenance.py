"""Handing stalled runs back to the workers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from runner import services
from runner.maintenance import recover_on_start
from runner.models import Run
from workflows.models import Recipe

pytestmark = pytest.mark.django_db


def test_recovery_at_start_leaves_a_live_lease_to_its_worker(
    story_recipe: Recipe, owner: Any
) -> None:
    run = services.run_start(user=owner, recipe=story_recipe, inputs={"topic": "x"})
    Run.objects.filter(pk=run.pk).update(
        lease_token="live", lease_expires_at=timezone.now() + timedelta(seconds=30)
    )

    assert recover_on_start() == 0
    assert Run.objects.get(pk=run.pk).lease_token == "live"


def test_recovery_at_start_hands_back_runs_whose_lease_ran_out_or_that_were_queued(
    story_recipe: Recipe, owner: Any
) -> None:
    queued = services.run_start(user=owner, recipe=story_recipe, inputs={"topic": "x"})
    stale = services.run_start(user=owner, recipe=story_recipe, inputs={"topic": "y"})
    Run.objects.filter(pk=stale.pk).update(
        lease_token="dead", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert recover_on_start() == 2
    assert Run.objects.filter(pk__in=[queued.pk, stale.pk], enqueued_at__isnull=False).count() == 2
