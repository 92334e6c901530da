from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path
from django.views.generic import RedirectView

from . import views
from .views import (
    callbacks,
    compare,
    editor,
    file_inputs,
    inbox,
    knowledge,
    recorded,
    reruns,
    runs,
    runs_overlay,
    schedules,
    stats,
    testing,
    tools,
    triggers,
    versions,
    works,
)

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.recipe_list, name="recipe-list"),
    path("recipes/<slug:slug>/run/", runs.run_new, name="run-new"),
    path("runs/", runs.run_list, name="runs-page"),
    path("runs/compare/", compare.run_compare, name="run-compare-page"),
    path("runs/<int:run_id>/", runs.run_monitor, name="run-monitor"),
    path("runs/<int:run_id>/header/", runs.run_header, name="run-header"),
    path("runs/<int:run_id>/files/<uuid:file_id>/", runs.run_file, name="run-file-page"),
    path("runs/<int:run_id>/steps/<int:seq>/", runs.run_step_card, name="run-step-card"),
    path("runs/<int:run_id>/cancel/", runs.run_cancel_view, name="run-cancel-page"),
    path("runs/<int:run_id>/resume/", reruns.run_resume_view, name="run-resume-page"),
    path("runs/<int:run_id>/fork/", reruns.run_fork_view, name="run-fork-page"),
    path("runs/<int:run_id>/callbacks/", callbacks.run_callbacks, name="run-callbacks-page"),
    path(
        "runs/<int:run_id>/callbacks/<uuid:delivery_id>/resend/",
        callbacks.run_callback_resend,
        name="run-callback-resend-page",
    ),
    path(
        "runs/<int:run_id>/files/<uuid:file_id>/thumbnail/",
        file_inputs.run_file_thumbnail,
        name="run-file-thumbnail",
    ),
    path("runs/<int:run_id>/save-as-test/", recorded.run_save_as_test, name="run-save-as-test"),
    path("inbox/", inbox.inbox, name="inbox"),
    path("inbox/tasks/<int:task_id>/", inbox.task_card, name="inbox-task"),
    path("inbox/tasks/<int:task_id>/decide/", inbox.task_decide_view, name="inbox-decide"),
    path("inbox/tasks/<int:task_id>/claim/", inbox.task_claim_view, name="inbox-claim"),
    # The recipes are listed on the home page: /recipes/ goes there rather than to a 404.
    path("recipes/", RedirectView.as_view(pattern_name="recipe-list"), name="recipes"),
    path("recipes/new/", views.recipe_new, name="recipe-new"),
    path("recipes/<slug:slug>/", editor.recipe_editor, name="recipe-editor"),
    path("recipes/<slug:slug>/check/", editor.recipe_check, name="recipe-check"),
    path("recipes/<slug:slug>/panels/step/", editor.step_panel, name="recipe-step-panel"),
    path("recipes/<slug:slug>/panels/branch/", editor.branch_panel, name="recipe-branch-panel"),
    path("recipes/<slug:slug>/panels/recipe/", editor.recipe_panel, name="recipe-settings-panel"),
    path(
        "recipes/<slug:slug>/panels/sources/try/", knowledge.source_try, name="recipe-sources-try"
    ),
    path(
        "recipes/<slug:slug>/panels/tool-arguments/",
        tools.tool_arguments,
        name="recipe-tool-arguments",
    ),
    path("recipes/<slug:slug>/import/", editor.draft_import, name="recipe-draft-import"),
    path("recipes/<slug:slug>/versions/", versions.recipe_versions, name="recipe-versions"),
    path("recipes/<slug:slug>/versions/diff/", versions.version_diff, name="recipe-version-diff"),
    path(
        "recipes/<slug:slug>/versions/<int:number>/restore/",
        versions.version_restore,
        name="recipe-version-restore",
    ),
    path("recipes/<slug:slug>/testrun/", testing.testrun_panel, name="recipe-testrun"),
    path(
        "recipes/<slug:slug>/testrun/result/", testing.testrun_result, name="recipe-testrun-result"
    ),
    path("recipes/<slug:slug>/tests/", testing.recipe_tests_page, name="recipe-tests"),
    path("recipes/<slug:slug>/triggers/", triggers.triggers_panel, name="recipe-triggers"),
    path(
        "recipes/<slug:slug>/triggers/schedules/<slug:key>/pause/",
        schedules.schedule_pause,
        name="recipe-schedule-pause",
    ),
    path(
        "recipes/<slug:slug>/triggers/schedules/<slug:key>/resume/",
        schedules.schedule_resume,
        name="recipe-schedule-resume",
    ),
    path("recipes/<slug:slug>/stats/", stats.recipe_stats, name="recipe-stats"),
    path(
        "recipes/<slug:slug>/runs-overlay/",
        runs_overlay.recipe_runs_overlay,
        name="recipe-runs-overlay",
    ),
    path(
        "recipes/<slug:slug>/steps/<str:key>/works/",
        works.step_works_page,
        name="recipe-step-works",
    ),
    # Actor names may hold any character, '/' too.
    path("actors/<path:name>/", stats.actor_stats, name="actor-stats"),
    path("recipes/<slug:slug>/tests/run/", testing.recipe_tests_run_all, name="recipe-tests-run"),
    path(
        "recipes/<slug:slug>/tests/replay/",
        recorded.recipe_tests_replay_view,
        name="recipe-tests-replay",
    ),
    path(
        "recipes/<slug:slug>/tests/<int:pk>/delete/",
        testing.recipe_test_remove,
        name="recipe-test-delete",
    ),
    path("knowledge/", knowledge.knowledge_list, name="knowledge-list"),
    path("knowledge/<slug:slug>/", knowledge.knowledge_base, name="knowledge-base"),
    path(
        "knowledge/<slug:slug>/settings/", knowledge.knowledge_settings, name="knowledge-settings"
    ),
    path("knowledge/<slug:slug>/upload/", knowledge.knowledge_upload, name="knowledge-upload"),
    path("knowledge/<slug:slug>/delete/", knowledge.knowledge_delete, name="knowledge-delete"),
    path("knowledge/<slug:slug>/search/", knowledge.knowledge_search, name="knowledge-search"),
    path(
        "knowledge/<slug:slug>/documents/",
        knowledge.knowledge_documents,
        name="knowledge-documents",
    ),
    path(
        "knowledge/<slug:slug>/documents/<int:pk>/",
        knowledge.knowledge_document,
        name="knowledge-document",
    ),
    path(
        "knowledge/<slug:slug>/documents/<int:pk>/delete/",
        knowledge.knowledge_document_delete,
        name="knowledge-document-delete",
    ),
]
