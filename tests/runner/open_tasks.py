"""Runs parked on a human step, each with its open task, made in three statements however many.

For the tests of the inbox and its websocket, and for benchmarks/inbox_scale.py. The rows are
what the runner leaves when a run waits for a reviewer; nothing is pushed.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

from runner.models import HumanTask, Run, StepRun
from runner.status import RunStatus, StepStatus, TaskStatus
from workflows.models import Recipe

QUESTION = "Is this story good enough to publish?"
MATERIAL = (
    "The storm knocked twice before the keeper opened the door. It asked for tea and a dry "
    "chair, and told her of the ships it had carried home."
)
OPTIONS = ["approve", "reject", "revise"]


def park_runs(
    recipe: Recipe,
    owner: Any,
    group: Group,
    count: int,
    *,
    material: str = MATERIAL,
    batch_size: int = 2000,
) -> list[HumanTask]:
    """Create `count` runs of `recipe` waiting on a human step of `group`; return their tasks,
    oldest first."""
    version = recipe.latest_version  # a query each time it is read
    runs = Run.objects.bulk_create(
        [
            Run(
                recipe=recipe,
                version=version,
                created_by=owner,
                inputs={"topic": f"storm {i}"},
                status=RunStatus.WAITING_HUMAN,
                next_seq=2,
            )
            for i in range(count)
        ],
        batch_size=batch_size,
    )
    steps = StepRun.objects.bulk_create(
        [
            StepRun(
                run=run,
                seq=1,
                step_key="review",
                step_name="Review",
                kind="human",
                status=StepStatus.WAITING_HUMAN,
                prompt=QUESTION,
            )
            for run in runs
        ],
        batch_size=batch_size,
    )
    return HumanTask.objects.bulk_create(
        [
            HumanTask(
                run=step.run,
                step_run=step,
                step_key="review",
                group=group,
                question=QUESTION,
                material=material,
                options=OPTIONS,
            )
            for step in steps
        ],
        batch_size=batch_size,
    )


def review_again(task: HumanTask, material: str, *, comment: str = "Name the storm.") -> HumanTask:
    """Decide `task` with revise, and open its step's review again in the same run, with the
    revised `material` (what the runner leaves after a revision comes back)."""
    HumanTask.objects.filter(pk=task.pk).update(
        status=TaskStatus.DECIDED, decision="revise", comment=comment
    )
    step = StepRun.objects.create(
        run=task.run,
        seq=task.run.steps.count() + 1,
        step_key=task.step_key,
        step_name="Review",
        kind="human",
        status=StepStatus.WAITING_HUMAN,
        prompt=QUESTION,
    )
    return HumanTask.objects.create(
        run=task.run,
        step_run=step,
        step_key=task.step_key,
        group=task.group,
        question=QUESTION,
        material=material,
        options=OPTIONS,
    )
