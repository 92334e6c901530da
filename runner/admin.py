from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from .models import ActorStat, BranchEvaluation, HumanTask, Run, RunEvent, StepRun


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
    inlines = [EvaluationInline]


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


@admin.register(ActorStat)
class ActorStatAdmin(ReadOnlyAdmin):
    """How each actor fared per step: the basis of the learned retry choice."""

    list_display = [
        "recipe",
        "step_key",
        "actor_alias",
        "successes",
        "attempts",
        "success_rate",
        "mean_latency",
    ]
    list_select_related = ["recipe"]
    list_filter = ["recipe"]

    @admin.display(description="success rate")
    def success_rate(self, stat: ActorStat) -> str:
        return f"{stat.successes / stat.attempts:.0%}" if stat.attempts else "-"

    @admin.display(description="mean latency (ms)")
    def mean_latency(self, stat: ActorStat) -> str:
        return f"{stat.mean_latency_ms:.0f}"
