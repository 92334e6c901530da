"""Read runs and tasks, always through what the user may see."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Prefetch, QuerySet
from django.http import Http404

from workflows.models import Recipe
from workflows.selectors import recipes_visible_to

from .models import BranchEvaluation, HumanTask, ModelCall, Run, RunFile, StepRun
from .status import TaskStatus


def runs_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Run]:
    """Return the runs of the recipes a user may see (staff: all)."""
    if not user.is_authenticated:
        return Run.objects.none()
    if user.is_staff:
        return _runs()
    return _runs().filter(recipe__in=recipes_visible_to(user).values("pk"))


def runs_listed(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Run]:
    """Return the runs a user may see, for a list of them (`runs_visible_to`, for pages).

    The recipes' ids are read first, not left as a subquery: the planner then knows how many
    runs they have, and reads a page of a rarely run recipe's by its index
    (runner_run_recipe_newest_idx) instead of walking every run newest first (tests/runner/
    test_list_indexes.py: 100,000 index entries for a page of 50 runs). A read of one run
    does not need the extra query.
    """
    if not user.is_authenticated or user.is_staff:
        return runs_visible_to(user)
    recipe_ids = list(recipes_visible_to(user).order_by().values_list("pk", flat=True))
    return _runs().filter(recipe__in=recipe_ids)


def _runs() -> QuerySet[Run]:
    return Run.objects.select_related("recipe", "version", "created_by")


def runs_of_recipe(runs: QuerySet[Run], slug: str) -> QuerySet[Run]:
    """Return those of `runs` that are of the recipe `slug`: by its id, read first, for the
    same reason as in `runs_visible_to` (a join on the slug reads a rarely run recipe's page
    by walking every run)."""
    return runs.filter(
        recipe_id__in=list(Recipe.objects.filter(slug=slug).values_list("pk", flat=True))
    )


def run_get(*, user: AbstractBaseUser | AnonymousUser, run_id: int) -> Run:
    """Return one run the user may see; another's run does not exist (404)."""
    run = runs_visible_to(user).filter(pk=run_id).first()
    if run is None:
        raise Http404(f"No run {run_id}.")
    return run


def run_file_get(
    *, user: AbstractBaseUser | AnonymousUser, run_id: int, file_id: object
) -> RunFile:
    """Return a file of a run the user may see; any other is no file (404), as for the run."""
    run = run_get(user=user, run_id=run_id)
    # Its text and pages are not what a download or a thumbnail needs.
    found = RunFile.objects.filter(run=run, pk=file_id).defer("text", "pages").first()
    if found is None:
        raise Http404(f"No file {file_id} of run {run_id}.")
    return found


def run_steps(run: Run) -> QuerySet[StepRun]:
    """Return the run's steps in order, with their evaluations and their calls to models."""
    return run.steps.order_by("seq", "attempt").prefetch_related(
        Prefetch("evaluations", queryset=BranchEvaluation.objects.order_by("order")),
        Prefetch("modelcall_set", queryset=ModelCall.objects.order_by("started_at", "pk")),
    )


def run_currencies(run: Run) -> list[str]:
    """Return the currencies the run's priced calls were priced in (at most two: more than
    one says its cost adds different currencies)."""
    found = (
        ModelCall.objects.filter(run=run)
        .exclude(currency="")
        .order_by("currency")
        .values_list("currency", flat=True)
        .distinct()
    )
    return list(found[:2])


def tasks_for_reviewer(user: AbstractBaseUser | AnonymousUser) -> QuerySet[HumanTask]:
    """Return the open tasks of the user's reviewer groups, oldest first."""
    if not user.is_authenticated:
        return HumanTask.objects.none()
    return (
        HumanTask.objects.filter(status=TaskStatus.OPEN, group__in=user.groups.all())
        .select_related("group", "run__recipe", "decided_by", "claimed_by")
        .order_by("created_at", "pk")
    )


def task_visible(*, user: AbstractBaseUser | AnonymousUser, task_id: int) -> HumanTask:
    """Return a task of one of the user's groups (any status), or 404."""
    task = (
        HumanTask.objects.select_related("group", "decided_by", "claimed_by", "run")
        .filter(pk=task_id)
        .first()
    )
    if task is None or not user.is_authenticated:
        raise Http404(f"No task {task_id}.")
    return task
