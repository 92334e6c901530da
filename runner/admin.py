from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from workflows.models import Recipe
from workflows.validators import whole_number

from .models import (
    ActorStatistic,
    BranchEvaluation,
    HumanTask,
    ModelCall,
    Run,
    RunEvent,
    StepRun,
)
from .steps.actor_stats import actor_stat_rows


class ReadOnlyAdmin(admin.ModelAdmin):
    """Runs are history: shown, never edited by hand."""

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class StepRunInline(ReadOnlyInline):
    model = StepRun
    fields = [
        "seq",
        "attempt",
        "step_key",
        "actor_alias",
        "status",
        "decision",
        "latency_ms",
        "tokens_in",
        "tokens_out",
        "model_calls",
        "cost",
        "error",
    ]


class TaskInline(ReadOnlyInline):
    model = HumanTask
    fk_name = "run"
    fields = ["step_key", "group", "status", "decision", "decided_by", "due_at"]


class EvaluationInline(ReadOnlyInline):
    model = BranchEvaluation
    fields = ["order", "branch", "priority", "matched", "taken", "reason"]
    show_change_link = False


class ModelCallInline(ReadOnlyInline):
    model = ModelCall
    fields = ModelCall.SHOWN_FIELDS
    show_change_link = False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["id", "recipe", "version", "status", "outcome", "created_by", "created_at"]
    list_filter = ["status", "outcome"]
    list_select_related = ["recipe", "version", "created_by"]
    search_fields = ["recipe__slug", "error"]
    inlines = [StepRunInline, TaskInline]


@admin.register(StepRun)
class StepRunAdmin(ReadOnlyAdmin):
    list_display = ["run", "seq", "attempt", "step_key", "status", "latency_ms"]
    list_filter = ["status", "kind"]
    list_select_related = ["run"]
    inlines = [EvaluationInline, ModelCallInline]


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    """Every call to a model, with what it cost: written by the runner, never by hand."""

    list_display = [
        "run",
        "seq",
        "purpose",
        "actor_name",
        "model",
        "tokens_in",
        "tokens_out",
        "tokens_estimated",
        "latency_ms",
        "cost",
        "currency",
        "started_at",
    ]
    list_filter = ["purpose", "provider", "tokens_estimated"]
    list_select_related = ["run"]
    search_fields = ["actor_name", "model", "error"]
    fields = ["run", "step_run", "seq", *ModelCall.SHOWN_FIELDS]


@admin.register(HumanTask)
class HumanTaskAdmin(ReadOnlyAdmin):
    list_display = ["id", "run", "step_key", "group", "status", "decision", "decided_by", "due_at"]
    list_filter = ["status", "group"]
    list_select_related = ["run", "group", "decided_by"]


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ["run", "seq", "type", "at"]
    list_filter = ["type"]
    list_select_related = ["run"]


@admin.register(ActorStatistic)
class ActorStatisticAdmin(ReadOnlyAdmin):
    """How each actor fared per step: the basis of the learned retry choice.

    Aggregated from the LLM StepRuns when the page is shown, as the retry choice does.
    """

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        recipes = Recipe.objects.filter(runs__isnull=False).distinct().order_by("slug")
        recipe_id = request.GET.get("recipe")
        filters = (
            {"run__recipe_id": whole_number(recipe_id)} if whole_number(recipe_id or "") else {}
        )
        names = dict(recipes.values_list("pk", "slug"))
        rows = [
            {
                **row,
                "recipe": names.get(row["run__recipe_id"], row["run__recipe_id"]),
                "success_rate": f"{row['successes'] / row['attempts']:.0%}",
                "mean_latency": f"{row['total_latency_ms'] / row['attempts']:.0f}",
            }
            for row in actor_stat_rows(**filters)
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Actor statistics",
            "rows": rows,
            "recipes": recipes,
            "selected": int(recipe_id) if filters else None,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/runner/actor_statistics.html", context)
