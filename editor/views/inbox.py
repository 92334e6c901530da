"""The reviewers' inbox: a review queue of the open tasks of the user's groups, decided with
htmx POSTs.

The page lists the tasks on the left and shows the selected one on the right (one column on a
phone): its question, its material (with a word diff against the step's previous review when
the step was revised), who is on it (claims) and the decision form. Filters (recipe, group,
due), a sort and a search narrow the list (`runner.review_queue`); each view pages with a keyset
cursor ("Load more" reads the next page after it, so tasks opening meanwhile move none across a
page's edge). Its script (static/monitor/reviews.js) follows /ws/reviews/: it keeps the count
live, fetches the card of a task that appears within what the whole queue shows, removes the
card of a task that was decided (by anyone), shows claims as they change, and triages by
keyboard.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.text import Truncator
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from runner.human import (
    BadDecision,
    ClaimedByAnother,
    NotInGroup,
    TaskClosed,
    task_claim,
    task_decide,
    task_unclaim,
)
from runner.models import HumanTask, StepRun
from runner.review_queue import (
    DUE_FILTERS,
    DUE_SOON,
    SORT_LABELS,
    FilterError,
    TaskFilters,
    due_state,
    previous_reviews,
    task_filters,
    tasks_in_queue,
)
from runner.selectors import tasks_for_reviewer
from workflows.apis.pagination import Keyset, PageOfList, keyset_window
from workflows.engine.step_kinds.human import COMMENT_REACHES
from workflows.models import Recipe

from .runs import HtmxHttpRequest

INBOX = "inbox/inbox.html"
PAGE_SIZE = 25
# How much of a task's material (or question) its row shows.
SNIPPET_CHARS = 120
# How long a decision made with a single key waits, to be taken back, before it is sent.
UNDO_SECONDS = 5


class DecisionForm(forms.Form):
    decision = forms.CharField(max_length=50)
    comment = forms.CharField(required=False, max_length=20000, strip=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("decision") == "revise" and not data.get("comment"):
            self.add_error("comment", f"Say what to revise: {COMMENT_REACHES}.")
        return data


@login_required
@require_GET
def inbox(request: HtmxHttpRequest) -> HttpResponse:
    """List the open tasks of the user's reviewer groups that match the filters, in the order
    asked (oldest first by default), a page at a time; with htmx, only the page's cards (the
    script's "Load more")."""
    filter_errors: list[str] = []
    try:
        filters = task_filters(request.GET)
    except FilterError as exc:
        filters, filter_errors = TaskFilters(), exc.errors
    tasks = tasks_in_queue(request.user, filters)
    if filter_errors:
        page = PageOfList([], None, "")
    else:
        page = keyset_window(tasks, request.GET, per_page=PAGE_SIZE)
    cursor_error = (
        "cursor: this link does not name a place in your inbox." if page.bad_cursor else ""
    )
    status = 400 if cursor_error or filter_errors else 200
    context = {
        "tasks": _for_queue(request.user, page.items, tasks),
        "page": page,
        "cursor_error": cursor_error,
        "filter_errors": filter_errors,
        "filters": filters,
        "page_size": PAGE_SIZE,
    }
    if request.htmx:
        return render(request, f"{INBOX}#task-page", context | {"partial": True}, status=status)
    # The navigation's count too (editor/templatetags/reviews.py): one count query, not two.
    context["count"] = context["open_task_count"] = tasks_for_reviewer(request.user).count()
    if filters.narrowed and not filter_errors:
        context["matching"] = tasks.count()
    context |= _filter_choices(request, filters, page.items)
    return render(request, INBOX, context, status=status)


def _filter_choices(
    request: HttpRequest, filters: TaskFilters, tasks: list[HumanTask]
) -> dict[str, Any]:
    """Return the options of the filter form: the user's groups, and the recipes of the tasks
    shown (and the one chosen); reading every open task's recipe would read all open tasks."""
    recipes = {task.run.recipe.slug: task.run.recipe.name for task in tasks}
    if filters.recipe and filters.recipe not in recipes:
        chosen = Recipe.objects.filter(slug=filters.recipe).values_list("name", flat=True)
        recipes[filters.recipe] = next(iter(chosen), filters.recipe)
    return {
        "group_choices": list(request.user.groups.order_by("name").values_list("name", flat=True)),
        "recipe_choices": sorted(recipes.items(), key=lambda item: item[1].lower()),
        "due_choices": DUE_FILTERS.items(),
        "sort_choices": SORT_LABELS.items(),
        "due_soon_ms": int(DUE_SOON.total_seconds() * 1000),
        "undo_seconds": UNDO_SECONDS,
        "undo_ms": UNDO_SECONDS * 1000,
    }


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


@login_required
@require_http_methods(["GET", "POST"])
def task_claim_view(request: HtmxHttpRequest, task_id: int) -> HttpResponse:
    """Show who is on a task (GET: the page refreshes it when a claim changes), or claim it or
    let it go (POST `action=claim|unclaim`); answer with the task's claim line."""
    task = _reviewer_task(request, task_id)
    notice, status = "", 200
    if request.method == "POST":
        action = request.POST.get("action")
        change = {"claim": task_claim, "unclaim": task_unclaim}.get(action or "")
        if change is None:
            notice, status = "action: claim or unclaim", 400
        else:
            try:
                task = change(task_id=task.pk, user=request.user)
            except NotInGroup as exc:
                notice, status = str(exc), 403
            except (TaskClosed, ClaimedByAnother) as exc:
                notice, status = str(exc), 409
                task = _task(task_id)
        if not request.htmx:
            if notice:
                messages.error(request, notice)
            return redirect("inbox")
    context = {"task": task, "claim_notice": notice}
    return render(request, f"{INBOX}#task-claim", context, status=status)


def _for_queue(
    user: Any, tasks: list[HumanTask], queue: QuerySet[HumanTask] | None = None
) -> list[HumanTask]:
    """Give each task what its card and row show besides the task: its step's name, a snippet
    of what it asks to decide, its place in the list's order (`cursor`, to load the tasks
    after it; `order`, text that sorts as the oldest-first queue does, to put a live card
    where it goes), its urgency, and its previous review's diff."""
    keyset = Keyset(queue if queue is not None else tasks_for_reviewer(user))  # no query
    previous = previous_reviews(tasks)
    step_names = dict(
        StepRun.objects.filter(pk__in=[task.step_run_id for task in tasks]).values_list(
            "pk", "step_name"
        )
    )
    now = timezone.now()
    for task in tasks:
        task.step_name = step_names.get(task.step_run_id) or task.step_key  # type: ignore[attr-defined]
        task.snippet = snippet(task.material or task.question)  # type: ignore[attr-defined]
        task.cursor = keyset.cursor(keyset.key(task))  # type: ignore[attr-defined]
        moment = task.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
        task.order = f"{moment} {task.pk:020d}"  # type: ignore[attr-defined]
        task.due_state = due_state(task, now=now)  # type: ignore[attr-defined]
        task.previous = previous.get(task.pk)  # type: ignore[attr-defined]
    return tasks


def snippet(text: str) -> str:
    """Return the start of what a task asks to decide, on one line, for its row."""
    return Truncator(" ".join(text.split())).chars(SNIPPET_CHARS)


def _task(task_id: int) -> HumanTask:
    task = (
        HumanTask.objects.select_related("group", "decided_by", "claimed_by", "run__recipe")
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
        "task": _for_queue(request.user, [task])[0],
        "form": form,
        "notice": notice,
        # A user outside the group sees the notice only, never the material.
        "hidden": status == 403,
    }
    return render(request, f"{INBOX}#task-card", context, status=status)
