from __future__ import annotations

from workflows.urls import SLUG, api
from workflows.validators import WHOLE_NUMBER

from . import apis, file_apis

UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

# Ids are whole numbers in ASCII digits that fit a bigint: any other is no run or task (404).
urlpatterns = [
    api(f"recipes/{SLUG}/runs", apis.RecipeRunsApi.as_view(), "recipe-runs"),
    api(f"recipes/{SLUG}/runs/batch", apis.RecipeRunBatchApi.as_view(), "recipe-run-batch"),
    api("runs", apis.RunListApi.as_view(), "run-list"),
    api("runs/compare", apis.RunCompareApi.as_view(), "run-compare"),
    api(f"runs/(?P<run_id>{WHOLE_NUMBER})", apis.RunDetailApi.as_view(), "run-detail"),
    api(f"runs/(?P<run_id>{WHOLE_NUMBER})/cancel", apis.RunCancelApi.as_view(), "run-cancel"),
    api(f"runs/(?P<run_id>{WHOLE_NUMBER})/resume", apis.RunResumeApi.as_view(), "run-resume"),
    api(f"runs/(?P<run_id>{WHOLE_NUMBER})/fork", apis.RunForkApi.as_view(), "run-fork"),
    api(f"runs/(?P<run_id>{WHOLE_NUMBER})/events", apis.RunEventsApi.as_view(), "run-events"),
    api(
        f"runs/(?P<run_id>{WHOLE_NUMBER})/files/(?P<file_id>{UUID})",
        file_apis.RunFileApi.as_view(),
        "run-file",
    ),
    api("tasks", apis.TaskListApi.as_view(), "task-list"),
    api(f"tasks/(?P<task_id>{WHOLE_NUMBER})/decide", apis.TaskDecideApi.as_view(), "task-decide"),
    api(f"tasks/(?P<task_id>{WHOLE_NUMBER})/claim", apis.TaskClaimApi.as_view(), "task-claim"),
    api(
        f"tasks/(?P<task_id>{WHOLE_NUMBER})/unclaim", apis.TaskUnclaimApi.as_view(), "task-unclaim"
    ),
]
