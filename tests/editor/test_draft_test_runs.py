"""The editor's test run runs the canvas, saved or not: it pins a hidden draft snapshot."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from editor.selectors import run_path
from runner.models import Run
from workflows.models import Recipe, RecipeVersion
from workflows.services import recipe_publish, recipe_update
from workflows.validators import RecipeRejected

from .conftest import STORY, draft, htmx_post

TERMINAL = ("succeeded", "failed", "ended", "cancelled")


def wait_for_run(run: Run, timeout: float = 20) -> Run:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in TERMINAL:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run.pk} is still {run.status}")


def unsaved_canvas(recipe: Recipe) -> dict[str, Any]:
    """Return the draft with an edit not saved: the `broken` branch now ends on the story."""
    document = draft(recipe)
    broken = document["steps"][0]["branches"][1]
    assert broken["name"] == "broken"
    broken["when"]["value"] = "(lighthouse)"
    return document


def start(web: Client, recipe: Recipe, document: dict[str, Any] | None, **fields: str) -> Any:
    """Post the test-run form as the editor does: the canvas document with the fields typed."""
    typed = {
        "start": "1",
        "input_topic": "the sea",
        "script_writer": STORY,
        "script_judge": "9",
        **fields,
    }
    return htmx_post(web, reverse("recipe-testrun", args=[recipe.slug]), document, **typed)


@pytest.mark.usefixtures("transactional_db")
def test_a_test_run_runs_the_unsaved_canvas_and_takes_its_path(
    story: Recipe, web: Client, celery_worker: Any
) -> None:
    canvas = unsaved_canvas(story)

    response = start(web, story, canvas)

    run = response.context["run"]
    assert run is not None, response.content.decode()
    assert run.version.is_draft_snapshot
    assert run.version.document == canvas
    assert draft(story)["steps"][0]["branches"][1]["when"]["value"] == "(error|failed)"
    assert not story.versions.published().exists()
    assert f'data-run="{run.pk}"' in response.content.decode()
    wait_for_run(run)
    assert run.status == "ended"
    assert run_path(run) == (["write"], [["write", "broken"]])

    # The saved draft, run the same way, takes the path the canvas no longer takes.
    saved_run = start(web, story, None).context["run"]
    wait_for_run(saved_run)
    assert saved_run.version.is_draft_snapshot
    assert saved_run.version != run.version
    assert saved_run.status == "succeeded"
    assert run_path(saved_run) == (["write"], [["write", "great"]])

    result = web.get(reverse("recipe-testrun-result", args=[story.slug]), {"run": run.pk})
    page = result.content.decode()
    assert "<code>write</code>" in page
    assert "ended" in page


@pytest.mark.django_db
class TestTheTestRunPanel:
    def test_the_same_canvas_run_twice_pins_one_snapshot(self, story: Recipe, web: Client) -> None:
        first = start(web, story, unsaved_canvas(story)).context["run"]
        second = start(web, story, unsaved_canvas(story)).context["run"]

        assert first.pk != second.pk
        assert first.version_id == second.version_id
        assert RecipeVersion.objects.count() == 1

    def test_a_canvas_with_errors_is_refused_with_the_errors_saving_gives(
        self, story: Recipe, web: Client
    ) -> None:
        canvas = draft(story)
        canvas["steps"][0]["branches"][0]["when"]["operator"] = "lessthan"
        canvas["steps"][1]["branches"][0]["target"] = "nowhere"
        with pytest.raises(RecipeRejected) as saving:
            recipe_update(recipe=story, document=copy.deepcopy(canvas))

        response = start(web, story, canvas)

        assert response.status_code == 200
        assert response.context["run"] is None
        assert response.context["document_errors"] == saving.value.errors
        page = response.content.decode()
        assert "has errors; fix them to test-run it" in page
        assert "steps[0].branches[0].when.operator" in page
        assert not RecipeVersion.objects.exists()
        assert not Run.objects.exists()
        # What was typed stays in the form.
        assert "the sea" in page

    @pytest.mark.parametrize(
        ("document", "message"),
        [("{not json", "document: not JSON"), ("[1, 2]", "a recipe is a JSON object")],
    )
    def test_a_document_that_is_not_one_is_a_bad_request(
        self, story: Recipe, web: Client, document: str, message: str
    ) -> None:
        url = reverse("recipe-testrun", args=[story.slug])

        response = web.post(url, {"start": "1", "document": document}, HTTP_HX_REQUEST="true")

        assert response.status_code == 400
        assert message in response.content.decode()
        assert not RecipeVersion.objects.exists()

    def test_a_script_the_run_refuses_leaves_no_snapshot_behind(
        self, story: Recipe, web: Client
    ) -> None:
        response = start(web, story, unsaved_canvas(story), script_editors="maybe")

        assert response.context["run"] is None
        assert "is not one of" in response.content.decode()
        assert not RecipeVersion.objects.exists()

    def test_opening_it_builds_the_form_from_the_canvas_and_keeps_what_was_typed(
        self, story: Recipe, web: Client
    ) -> None:
        canvas = draft(story)
        canvas["inputs"]["tone"] = {"type": "string"}
        url = reverse("recipe-testrun", args=[story.slug])

        response = htmx_post(web, url, canvas, input_topic="kept <b>as typed</b>")

        page = response.content.decode()
        assert 'name="input_tone"' in page
        assert "kept &lt;b&gt;as typed&lt;/b&gt;" in page
        assert "This field is required" not in page
        assert response.context["run"] is None
        assert not RecipeVersion.objects.exists()

    def test_snapshots_stay_out_of_the_versions_tab_and_the_recipe_list(
        self, story: Recipe, author: Any, web: Client
    ) -> None:
        run = start(web, story, unsaved_canvas(story)).context["run"]
        assert run.version.number == 0

        versions = web.get(reverse("recipe-versions", args=[story.slug]), HTTP_HX_REQUEST="true")
        assert versions.context["versions"] == []
        diff = web.get(
            reverse("recipe-version-diff", args=[story.slug]),
            {"a": "0", "b": "draft"},
            HTTP_HX_REQUEST="true",
        )
        assert "Choose two versions" in diff.content.decode()
        restore = web.post(reverse("recipe-version-restore", args=[story.slug, 0]))
        assert restore.status_code == 404
        assert "draft only" in web.get(reverse("recipe-list")).content.decode()

        published = recipe_publish(recipe=story, user=author)
        assert published.number == 1
        versions = web.get(reverse("recipe-versions", args=[story.slug]), HTTP_HX_REQUEST="true")
        assert [v.number for v in versions.context["versions"]] == [1]

    def test_the_run_pages_name_a_snapshot_run_draft(self, story: Recipe, web: Client) -> None:
        run = start(web, story, unsaved_canvas(story)).context["run"]

        monitor = web.get(reverse("run-monitor", args=[run.pk])).content.decode()
        runs = web.get(reverse("runs-page")).content.decode()

        assert '<span class="muted">draft</span>' in monitor
        assert '<span class="muted">draft</span>' in runs
        # As a label, not anywhere: a page's random CSRF token may hold "v0".
        assert ">v0<" not in monitor
        assert ">v0<" not in runs
