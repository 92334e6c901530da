from __future__ import annotations

from workflows.urls import SLUG, api

from . import apis

urlpatterns = [
    api(f"recipes/{SLUG}/runs", apis.RecipeRunsApi.as_view(), "recipe-runs"),
    api("runs", apis.RunListApi.as_view(), "run-list"),
    api(r"runs/(?P<run_id>\d+)", apis.RunDetailApi.as_view(), "run-detail"),
    api(r"runs/(?P<run_id>\d+)/cancel", apis.RunCancelApi.as_view(), "run-cancel"),
    api(r"runs/(?P<run_id>\d+)/events", apis.RunEventsApi.as_view(), "run-events"),
    api("tasks", apis.TaskListApi.as_view(), "task-list"),
    api(r"tasks/(?P<task_id>\d+)/decide", apis.TaskDecideApi.as_view(), "task-decide"),
]
