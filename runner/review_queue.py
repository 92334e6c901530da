"""The review queue: the reviewer's open tasks filtered, sorted and searched; due-date urgency;
and what changed in a revised answer since the step's previous review.

Reads only. The inbox page and `GET /api/tasks/` share it, so that both take the same query
parameters and page the result with the same keyset cursors (workflows/apis/pagination.py):
every order here is a plain-field order, so the open-task indexes still serve it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.http import QueryDict
from django.utils import timezone

from workflows.models import Recipe
from workflows.validators import text_problem

from .compare import TextDiff, text_diff
from .models import HumanTask
from .selectors import tasks_for_reviewer
from .status import TaskStatus

# A task due within this time is "due soon" (its badge, the `due=soon` filter).
DUE_SOON = timedelta(hours=1)
MAX_SEARCH_CHARS = 200

SORTS: dict[str, tuple[str, ...]] = {
    "oldest": ("created_at", "pk"),
    "newest": ("-created_at", "-pk"),
    # Tasks with a due time only: keyset cursors read no NULL (say so where it is offered).
    "due": ("due_at", "pk"),
}
SORT_LABELS = {"oldest": "Oldest first", "newest": "Newest first", "due": "Due soonest first"}
DUE_FILTERS = {
    "overdue": "Overdue",
    "soon": f"Due within {int(DUE_SOON.total_seconds() // 60)} minutes",
    "later": "Due later",
    "none": "No due time",
}

DueState = Literal["overdue", "soon", ""]


class FilterError(ValueError):
    """Query parameters the queue cannot read: `errors` are `name: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class TaskFilters:
    """What a reviewer asked to see: a recipe (slug), a group (name), a due state, a search."""

    recipe: str = ""
    group: str = ""
    due: str = ""
    q: str = ""
    sort: str = "oldest"

    @property
    def narrowed(self) -> bool:
        """Whether the view differs from the whole queue, oldest first (the live one)."""
        return self != TaskFilters()


def task_filters(params: QueryDict | dict[str, Any]) -> TaskFilters:
    """Read the filters from query parameters; raise FilterError naming each bad one."""
    values = {name: str(params.get(name) or "").strip() for name in ("recipe", "group", "due", "q")}
    sort = str(params.get("sort") or "oldest").strip()
    errors = []
    for name, value in values.items():
        if problem := text_problem(value):
            errors.append(f"{name}: {problem}")
    if len(values["q"]) > MAX_SEARCH_CHARS:
        errors.append(f"q: at most {MAX_SEARCH_CHARS} characters")
    if values["due"] and values["due"] not in DUE_FILTERS:
        errors.append(f"due: one of {', '.join(DUE_FILTERS)}")
    if sort not in SORTS:
        errors.append(f"sort: one of {', '.join(SORTS)}")
    if errors:
        raise FilterError(errors)
    return TaskFilters(sort=sort, **values)


def tasks_in_queue(
    user: AbstractBaseUser | AnonymousUser,
    filters: TaskFilters,
    *,
    now: datetime | None = None,
) -> QuerySet[HumanTask]:
    """Return the user's open tasks that match `filters`, in the order they ask for.

    A recipe or group is looked up first and filtered by id (as `runs_of_recipe` does), so
    the open-task indexes read a rare recipe's or group's page; a group that is not one of the
    user's matches nothing.
    """
    tasks = tasks_for_reviewer(user)
    now = now or timezone.now()
    if filters.recipe:
        ids = list(Recipe.objects.filter(slug=filters.recipe).values_list("pk", flat=True))
        tasks = tasks.filter(run__recipe_id__in=ids)
    if filters.group:
        tasks = tasks.filter(group_id__in=_group_ids(user, filters.group))
    if filters.due == "overdue":
        tasks = tasks.filter(due_at__lte=now)
    elif filters.due == "soon":
        tasks = tasks.filter(due_at__gt=now, due_at__lte=now + DUE_SOON)
    elif filters.due == "later":
        tasks = tasks.filter(due_at__gt=now + DUE_SOON)
    elif filters.due == "none":
        tasks = tasks.filter(due_at__isnull=True)
    if filters.q:
        q = filters.q
        tasks = tasks.filter(
            Q(step_key__icontains=q)
            | Q(question__icontains=q)
            | Q(material__icontains=q)
            | Q(run__recipe__name__icontains=q)
        )
    if filters.sort == "due":
        tasks = tasks.filter(due_at__isnull=False)
    return tasks.order_by(*SORTS[filters.sort])


def _group_ids(user: AbstractBaseUser | AnonymousUser, name: str) -> list[int]:
    if not user.is_authenticated:
        return []
    return list(user.groups.filter(name=name).values_list("pk", flat=True))


def due_state(task: HumanTask, *, now: datetime | None = None) -> DueState:
    """Return how urgent an open task is: past its due time, due soon, or neither."""
    if task.due_at is None or task.status != TaskStatus.OPEN:
        return ""
    now = now or timezone.now()
    if task.due_at <= now:
        return "overdue"
    return "soon" if task.due_at <= now + DUE_SOON else ""


@dataclass(frozen=True)
class PreviousReview:
    """The step's review before this task in the same run, and how the material changed."""

    task: HumanTask
    diff: TextDiff


def previous_reviews(tasks: list[HumanTask]) -> dict[int, PreviousReview]:
    """Return, by task id, the decided review of the same step earlier in the same run, with
    the word diff of its material to the task's (one query for the whole page)."""
    if not tasks:
        return {}
    earlier = (
        HumanTask.objects.filter(
            run_id__in={t.run_id for t in tasks},
            step_key__in={t.step_key for t in tasks},
            status=TaskStatus.DECIDED,
        )
        .select_related("decided_by")
        .order_by("pk")
    )
    by_step: dict[tuple[int, str], list[HumanTask]] = {}
    for review in earlier:
        by_step.setdefault((review.run_id, review.step_key), []).append(review)
    found = {}
    for task in tasks:
        # Ids grow as tasks are created: the last smaller id is the review just before.
        before = [r for r in by_step.get((task.run_id, task.step_key), []) if r.pk < task.pk]
        if before:
            previous = before[-1]
            found[task.pk] = PreviousReview(previous, text_diff(previous.material, task.material))
    return found
