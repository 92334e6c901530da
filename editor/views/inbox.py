"""The reviewers' inbox: the open tasks of the user's groups, decided with htmx POSTs.

The page's script (static/monitor/reviews.js) follows /ws/reviews/: it fetches the card of a
task that appears and removes the card of a task someone else decided.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from runner.human import BadDecision, NotInGroup, TaskClosed, task_decide
from runner.models import HumanTask
from runner.selectors import tasks_for_reviewer

from .runs import HtmxHttpRequest

INBOX = "inbox/inbox.html"


class DecisionForm(forms.Form):
    decision = forms.CharField(max_length=50)
    comment = forms.CharField(required=False, max_length=20000, strip=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("decision") == "revise" and not data.get("comment"):
            self.add_error("comment", "Say what to revise: the comment is sent back to the writer.")
        return data


@login_required
@require_GET
def inbox(request: HtmxHttpRequest) -> HttpResponse:
    """List the open tasks of the user's reviewer groups, oldest first."""
    tasks = list(tasks_for_reviewer(request.user))
    return render(request, INBOX, {"tasks": tasks})


@login_required
@require_GET
def task_card(request: HtmxHttpRequest, task_id: int) -> HttpResponse:
    """Render one task's card (the page adds it when the task appears)."""
    return _card(request, _reviewer_task(request, task_id))


@login_required
@require_POST
def task_decide_view(request: HtmxHttpRequest, task_id: int) -> HttpResponse:
    """Record the reviewer's decision; answer with the task's card in its new state."""
    task = _reviewer_task(request, task_id)
    form = DecisionForm(request.POST)
    notice, status = "", 200
    if not form.is_valid():
        status = 400
    else:
        try:
            task = task_decide(
                task_id=task.pk,
                user=request.user,
                decision=form.cleaned_data["decision"],
                comment=form.cleaned_data["comment"],
            )
        except NotInGroup as exc:
            notice, status = str(exc), 403
        except TaskClosed as exc:
            notice, status = f"{exc} Nothing was recorded.", 409
            task = _task(task_id)
        except BadDecision as exc:
            form.add_error("decision", str(exc).removeprefix("decision: "))
            status = 400
    if request.htmx:
        return _card(request, task, form=form, notice=notice, status=status)
    if status == 200:
        messages.success(request, f"Recorded: {task.decision} on task {task.pk}.")
    else:
        errors = [notice] if notice else [e for es in form.errors.values() for e in es]
        for error in errors:
            messages.error(request, error)
    return redirect("inbox")


def _task(task_id: int) -> HumanTask:
    task = (
        HumanTask.objects.select_related("group", "decided_by", "run__recipe")
        .filter(pk=task_id)
        .first()
    )
    if task is None:
        raise Http404(f"No task {task_id}.")
    return task


def _reviewer_task(request: HttpRequest, task_id: int) -> HumanTask:
    """Return a task of one of the user's groups (any status); others do not exist (404)."""
    task = _task(task_id)
    if not request.user.groups.filter(pk=task.group_id).exists():
        raise Http404(f"No task {task_id}.")
    return task


def _card(
    request: HttpRequest,
    task: HumanTask,
    *,
    form: DecisionForm | None = None,
    notice: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "task": task,
        "form": form,
        "notice": notice,
        # A user outside the group sees the notice only, never the material.
        "hidden": status == 403,
    }
    return render(request, f"{INBOX}#task-card", context, status=status)
