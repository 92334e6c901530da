"""Publishing, comparing and restoring versions; test runs and recipe tests from the editor."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from editor.models import RecipeTest
from workflows.models import Recipe
from workflows.services import recipe_publish, recipe_update

from .conftest import draft, htmx_post

pytestmark = pytest.mark.django_db


class TestVersions:
    def test_it_publishes_with_a_note(self, story: Recipe, author: Any, web: Client) -> None:
        response = htmx_post(
            web, reverse("recipe-versions", args=[story.slug]), None, note="First <cut>"
        )
        page = response.content.decode()
        assert "Published v1." in page
        assert "First &lt;cut&gt;" in page
        assert story.versions.get().note == "First <cut>"

    def test_it_refuses_with_409_to_publish_a_draft_saved_since_the_page_read_it(
        self, story: Recipe, web: Client
    ) -> None:
        seen = story.revision
        recipe_update(recipe=story, document={**draft(story), "name": "Saved elsewhere"})
        url = reverse("recipe-versions", args=[story.slug])

        stale = htmx_post(web, url, None, note="", revision=str(seen))

        assert stale.status_code == 409
        assert "saved elsewhere" in stale.content.decode()
        assert not story.versions.exists()
        fresh = htmx_post(web, url, None, note="", revision=str(seen + 1))
        assert "Published v1." in fresh.content.decode()
        assert story.versions.get().document["name"] == "Saved elsewhere"

    @pytest.mark.parametrize("revision", ["x", "-1", "²", "1.0", "9" * 40])
    def test_it_refuses_a_revision_that_is_not_one(
        self, story: Recipe, web: Client, revision: str
    ) -> None:
        response = htmx_post(
            web, reverse("recipe-versions", args=[story.slug]), None, revision=revision
        )

        assert response.status_code == 200
        assert "not a draft revision" in response.content.decode()
        assert not story.versions.exists()

    def test_it_lists_why_a_draft_cannot_be_published(self, author: Any, web: Client) -> None:
        Recipe.objects.create(slug="empty", name="Empty", owner=author)
        response = htmx_post(web, reverse("recipe-versions", args=["empty"]), None, note="")
        assert "cannot be published" in response.content.decode()
        assert not Recipe.objects.get(slug="empty").versions.exists()

    def test_it_is_a_page_too(self, story: Recipe, author: Any, web: Client) -> None:
        recipe_publish(recipe=story, user=author)
        page = web.get(reverse("recipe-versions", args=[story.slug])).content.decode()
        assert "<html" in page
        assert "v1" in page

    def test_it_shows_what_changed_between_versions(
        self, story: Recipe, author: Any, web: Client
    ) -> None:
        recipe_publish(recipe=story, user=author)
        doc = draft(story)
        doc["steps"][0]["branches"][0]["when"]["value"] = 80
        del doc["steps"][1]["branches"][2]
        recipe_update(recipe=story, document=doc)
        recipe_publish(recipe=story, user=author)
        response = web.get(
            reverse("recipe-version-diff", args=[story.slug]),
            {"a": "1", "b": "2"},
            HTTP_HX_REQUEST="true",
        )
        page = response.content.decode()
        assert "From v1 to v2" in page
        assert "Branches removed" in page
        assert "revise" in page
        assert "len &lt; 80" not in page or "Branches changed" in page
        assert [c.branch for c in response.context["diff"].branches_changed] == ["too_short"]
        draft_diff = web.get(
            reverse("recipe-version-diff", args=[story.slug]),
            {"a": "2", "b": "draft"},
            HTTP_HX_REQUEST="true",
        )
        assert draft_diff.context["diff"].is_empty
        bad = web.get(
            reverse("recipe-version-diff", args=[story.slug]), {"a": "x"}, HTTP_HX_REQUEST="true"
        )
        assert "Choose two versions" in bad.content.decode()

    def test_it_restores_a_version_into_the_draft(
        self, story: Recipe, author: Any, web: Client
    ) -> None:
        recipe_publish(recipe=story, user=author)
        recipe_update(recipe=story, document={**draft(story), "name": "Changed"})
        story.refresh_from_db()
        url = reverse("recipe-version-restore", args=[story.slug, 1])
        stale = htmx_post(web, url, None, revision="1")
        assert stale.status_code == 409
        assert "saved elsewhere" in stale.content.decode()
        response = htmx_post(web, url, None, revision=str(story.revision))
        assert response["HX-Refresh"] == "true"
        story.refresh_from_db()
        assert story.name == "Story with review"
        assert web.post(reverse("recipe-version-restore", args=[story.slug, 9])).status_code == 404


class TestTestRuns:
    def test_it_needs_no_published_version(self, story: Recipe, web: Client) -> None:
        response = htmx_post(web, reverse("recipe-testrun", args=[story.slug]), None)
        page = response.content.decode()
        assert "Runs the recipe as the canvas shows it" in page
        assert 'name="input_topic"' in page

    def test_it_offers_inputs_and_answers_per_alias(
        self, story: Recipe, author: Any, web: Client
    ) -> None:
        recipe_publish(recipe=story, user=author)
        page = htmx_post(web, reverse("recipe-testrun", args=[story.slug]), None).content.decode()
        assert 'name="input_topic"' in page
        for alias in ("writer", "judge", "editors"):
            assert f'name="script_{alias}"' in page

    def test_it_starts_a_dry_run(self, story: Recipe, author: Any, web: Client) -> None:
        recipe_publish(recipe=story, user=author)
        response = htmx_post(
            web,
            reverse("recipe-testrun", args=[story.slug]),
            None,
            start="1",
            input_topic="a dragon",
            script_writer="One\n---\nTwo",
            script_judge="9",
        )
        run = response.context["run"]
        assert run is not None
        assert run.script == {"writer": ["One", "Two"], "judge": ["9"]}
        assert run.inputs == {"topic": "a dragon"}
        assert f'data-run="{run.pk}"' in response.content.decode()

    def test_it_shows_missing_inputs_inline(self, story: Recipe, author: Any, web: Client) -> None:
        recipe_publish(recipe=story, user=author)
        response = htmx_post(web, reverse("recipe-testrun", args=[story.slug]), None, start="1")
        assert response.context["run"] is None
        assert "This field is required" in response.content.decode()

    def test_the_result_of_another_recipes_run_does_not_exist(
        self, story: Recipe, author: Any, web: Client
    ) -> None:
        url = reverse("recipe-testrun-result", args=[story.slug])
        assert web.get(url, {"run": "x"}).status_code == 404
        assert web.get(url, {"run": "12345"}).status_code == 404


class TestRecipeTests:
    def test_it_saves_a_test_from_a_run(self, story: Recipe, web: Client) -> None:
        url = reverse("recipe-tests", args=[story.slug])
        data = {
            "name": "happy path",
            "inputs": '{"topic": "x"}',
            "script": '{"writer": ["a"]}',
            "expected_path": "write → review",
            "expected_status": "succeeded",
        }
        response = htmx_post(web, url, None, **data)
        assert response["HX-Trigger"] == json.dumps(
            {"recipe-tests-changed": {"name": "happy path"}}
        )
        test = RecipeTest.objects.get()
        assert (test.expected_path, test.inputs, test.script) == (
            ["write", "review"],
            {"topic": "x"},
            {"writer": ["a"]},
        )
        again = htmx_post(web, url, None, **data)
        assert "exists already" in again.content.decode()
        bad = htmx_post(web, url, None, name="other", script='{"writer": "a"}', expected_path="")
        assert "alias: [answers]" in bad.content.decode()

    def test_running_tests_without_a_version_says_why(
        self, story: Recipe, author: Any, web: Client
    ) -> None:
        RecipeTest.objects.create(recipe=story, name="t", expected_path=["write"])
        response = htmx_post(web, reverse("recipe-tests-run", args=[story.slug]), None)
        assert "no published version" in response.content.decode()
        assert RecipeTest.objects.get().last_result == RecipeTest.Result.ERROR

    def test_it_shows_coverage_of_every_active_branch(self, story: Recipe, web: Client) -> None:
        RecipeTest.objects.create(
            recipe=story,
            name="t",
            expected_path=["write"],
            last_taken=[["write", "great"]],
            last_result="passed",
        )
        response = web.get(reverse("recipe-tests", args=[story.slug]), HTTP_HX_REQUEST="true")
        coverage = response.context["coverage"]
        assert (coverage.covered, coverage.total) == (1, 7)
        assert ["write", "too_short"] in response.context["coverage_data"]["untaken"]
        assert "1 of 7" in response.content.decode()

    def test_it_deletes_a_test(self, story: Recipe, web: Client) -> None:
        test = RecipeTest.objects.create(recipe=story, name="t", expected_path=["write"])
        htmx_post(web, reverse("recipe-test-delete", args=[story.slug, test.pk]), None)
        assert not RecipeTest.objects.exists()
