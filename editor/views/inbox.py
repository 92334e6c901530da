"""The reviewers' inbox: the open tasks of the user's groups, decided with htmx POSTs.

The page shows the open count and the oldest tasks, a page at a time ("Load more" reads the next
page after a keyset cursor, so tasks opening meanwhile move none across a page's edge). Its
script (static/monitor/reviews.js) follows /ws/reviews/: it keeps the count live, fetches the
card of a task that appears within what the page shows, and removes the card of a task someone
else decided.
"""

from __future__ import annotations

from datetime import UTC
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
from workflows.apis.pagination import Keyset, keyset_window

from .runs import HtmxHttpRequest

INBOX = "inbox/inbox.html"
PAGE_SIZE = 25


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
    """List the open tasks of the user's reviewer groups, oldest first, a page at a time; with
    htmx, only the page's cards (the script's "Load more")."""
    tasks = tasks_for_reviewer(request.user)
    page = keyset_window(tasks, request.GET, per_page=PAGE_SIZE)
    cursor_error = (
        "cursor: this link does not name a place in your inbox." if page.bad_cursor else ""
    )
    status = 400 if cursor_error else 200
    context = {
        "tasks": _with_positions(request.user, page.items),
        "page": page,
        "cursor_error": cursor_error,
        "page_size": PAGE_SIZE,
    }
    if request.htmx:
        return render(request, f"{INBOX}#task-page", context, status=status)
    # The navigation's count too (editor/templatetags/reviews.py): one count query, not two.
    context["count"] = context["open_task_count"] = tasks.count()
    return render(request, INBOX, context, status=status)


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


def _with_positions(user: Any, tasks: list[HumanTask]) -> list[HumanTask]:
    """Give each task its place in the inbox's order, for the page's script: `cursor` to load
    the tasks after it, `order` (text that sorts as the tasks do) to put a card where it goes."""
    keyset = Keyset(tasks_for_reviewer(user))  # its order only: no query
    for task in tasks:
        task.cursor = keyset.cursor(keyset.key(task))  # type: ignore[attr-defined]
        moment = task.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        task.order = f"{moment} {task.pk:020d}"  # type: ignore[attr-defined]
    return tasks


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
        "task": _with_positions(request.user, [task])[0],
        "form": form,
        "notice": notice,
        # A user outside the group sees the notice only, never the material.
        "hidden": status == 403,
    }
    return render(request, f"{INBOX}#task-card", context, status=status)
