"""Human steps: ask the reviewers (the commit creates their task), or read their decision.

A first execution renders the question and the material and waits (`WAITING_HUMAN`); a dry
run's script decides at once. Once a reviewer decided, or the task timed out, the run's next
claim names the task (`resume_task`) and the step's result is the task's decision.
"""

from __future__ import annotations

from ..claims import StepOutcome
from ..models import HumanTask
from ..status import StepStatus, TaskStatus
from .session import Session

KIND = "human"


def execute(session: Session) -> StepOutcome:
    claim = session.claim
    step = claim.step
    task_id = claim.next.get("resume_task")
    if task_id:
        task = HumanTask.objects.get(pk=task_id)
        timed_out = task.status == TaskStatus.TIMED_OUT
        return StepOutcome(
            status=StepStatus.TIMED_OUT if timed_out else StepStatus.DECIDED,
            prompt=task.question,
            response=task.comment,
            decision=task.decision,
            timed_out=timed_out,
            actor_alias=step.actor or "",
            task=task,
        )
    actor = session.resolve(step.actor or "")
    outcome = StepOutcome(
        status=StepStatus.WAITING_HUMAN,
        prompt=session.prompt(),
        material=_material(session),
        actor_alias=actor.alias,
        actor_name=actor.name,
        human_group_id=actor.group_id,
    )
    if actor.scripted:
        index = session.next_call(actor.alias)
        outcome.scripted_decision = actor.scripted[min(index, len(actor.scripted) - 1)]
    return outcome


def _material(session: Session) -> str:
    """Return what the reviewers read: the step's `material`, else the run's last answer."""
    claim = session.claim
    if claim.step.material:
        return session.render(claim.step.material)
    return claim.state.last_answer(session.answers)
