"""The editor pages: who may open them, the recipe list, a new recipe, the editor page, lint."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from tests.factories import ActorFactory
from workflows import engine
from workflows.models import Recipe
from workflows.services import recipe_import

from .conftest import draft, htmx_post, story_document

pytestmark = pytest.mark.django_db


PAGES = ["recipe-editor", "recipe-versions", "recipe-tests"]
PANELS = [
    "recipe-check",
    "recipe-step-panel",
    "recipe-branch-panel",
    "recipe-settings-panel",
    "recipe-draft-import",
    "recipe-testrun",
    "recipe-tests-run",
]


class TestAccess:
    @pytest.mark.parametrize("name", PAGES)
    def test_it_asks_for_a_login(self, story: Recipe, name: str) -> None:
        response = Client().get(reverse(name, args=[story.slug]))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))

    @pytest.mark.parametrize("name", PANELS)
    def test_panels_ask_for_a_login(self, story: Recipe, name: str) -> None:
        response = Client().post(reverse(name, args=[story.slug]))
        assert response.status_code == 302

    def test_the_new_recipe_page_asks_for_a_login(self, db: None) -> None:
        assert Client().get(reverse("recipe-new")).status_code == 302

    @pytest.mark.parametrize("name", PAGES)
    def test_a_recipe_of_someone_else_does_not_exist(
        self, story: Recipe, stranger_web: Client, name: str
    ) -> None:
        assert stranger_web.get(reverse(name, args=[story.slug])).status_code == 404

    @pytest.mark.parametrize("name", PANELS)
    def test_its_panels_do_not_exist_either(
        self, story: Recipe, stranger_web: Client, name: str
    ) -> None:
        response = htmx_post(stranger_web, reverse(name, args=[story.slug]), draft(story), step=0)
        assert response.status_code == 404

    def test_a_shared_recipe_opens(
        self, story: Recipe, stranger: Any, stranger_web: Client
    ) -> None:
        story.shared_with_users.add(stranger)
        assert stranger_web.get(reverse("recipe-editor", args=[story.slug])).status_code == 200


class TestRecipeList:
    def test_it_links_every_recipe_to_its_editor(self, story: Recipe, web: Client) -> None:
        page = web.get(reverse("recipe-list")).content.decode()
        assert reverse("recipe-editor", args=["story"]) in page
        assert reverse("recipe-new") in page


class TestNewRecipe:
    def test_it_creates_an_empty_draft_and_opens_the_editor(self, author: Any, web: Client) -> None:
        response = web.post(
            reverse("recipe-new"), {"create": "1", "name": "My First Recipe", "description": "d"}
        )
        assert response.status_code == 302
        assert response["Location"] == reverse("recipe-editor", args=["my-first-recipe"])
        recipe = Recipe.objects.get(slug="my-first-recipe")
        assert recipe.owner == author
        page = web.get(response["Location"])
        assert page.status_code == 200
        assert page.context["document"]["steps"] == []

    @pytest.mark.parametrize(
        ("slug", "message"),
        [("story", "exists already"), ("new", "is reserved"), ("Bad Slug", "Use lowercase")],
    )
    def test_it_refuses_a_slug_it_cannot_use(
        self, story: Recipe, web: Client, slug: str, message: str
    ) -> None:
        response = web.post(reverse("recipe-new"), {"create": "1", "name": "X", "slug": slug})
        assert response.status_code == 200
        assert message in response.content.decode()

    def test_it_imports_a_recipe_file(self, story_actors: None, web: Client) -> None:
        upload = SimpleUploadedFile(
            "r.json", json.dumps(story_document(slug="imported")).encode(), "application/json"
        )
        response = web.post(reverse("recipe-new"), {"import": "1", "file": upload})
        assert response.status_code == 302
        assert response["Location"] == reverse("recipe-editor", args=["imported"])

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            (b"{not json", "invalid JSON"),
            (b"- a\n- list", "a recipe is a JSON object"),
            (
                json.dumps(story_document(slug="x", actors={"writer": "nobody"})).encode(),
                "unknown actor",
            ),
        ],
    )
    def test_it_lists_why_a_file_was_not_imported(
        self, story_actors: None, web: Client, content: bytes, message: str
    ) -> None:
        upload = SimpleUploadedFile("r.json", content)
        response = web.post(reverse("recipe-new"), {"import": "1", "file": upload})
        assert response.status_code == 200
        assert message in response.content.decode()


class TestEditorPage:
    def test_it_embeds_the_draft_the_page_draws(self, story: Recipe, web: Client) -> None:
        response = web.get(reverse("recipe-editor", args=[story.slug]))
        page = response.content.decode()
        assert response.status_code == 200
        # The canvas and the step list are drawn from it (tests/e2e/test_editor.py).
        found = re.search(
            r'<script id="recipe-document" type="application/json">(.*?)</script>', page
        )
        assert found is not None
        assert json.loads(found.group(1)) == draft(story)
        assert response.context["config"]["revision"] == story.revision

    def test_it_names_the_actors_a_new_step_starts_with_and_their_aliases(
        self, story: Recipe, web: Client
    ) -> None:
        ActorFactory(name="a-model")  # the first model: its alias is named after it
        config = web.get(reverse("recipe-editor", args=[story.slug])).context["config"]
        assert config["starterActors"] == {
            "model": {"alias": "a-model", "reference": "a-model"},
            "reviewers": {"alias": "editor-reviewers", "reference": "@human:editor-reviewers"},
        }

    def test_it_embeds_the_engine_catalog_the_canvas_draws_labels_from(
        self, story: Recipe, web: Client
    ) -> None:
        page = web.get(reverse("recipe-editor", args=[story.slug])).content.decode()
        found = re.search(
            r'<script id="branchline-catalog" type="application/json">(.*?)</script>', page
        )
        assert found is not None
        assert json.loads(found.group(1)) == engine.catalog()
        for kind in engine.catalog()["steps"]:
            assert f'data-add-step="{kind["kind"]}"' in page

    def test_it_escapes_what_authors_wrote(
        self, author: Any, story_actors: None, web: Client
    ) -> None:
        doc = story_document(name="</script><script>alert(1)</script>")
        doc["steps"][0]["name"] = "<img src=x onerror=alert(1)>"
        recipe = recipe_import(user=author, data=doc).recipe
        page = web.get(reverse("recipe-editor", args=[recipe.slug])).content.decode()
        assert "<img src=x" not in page
        assert "</script><script>alert(1)" not in page
        assert "\\u003Cimg src=x onerror=alert(1)\\u003E" in page


class TestCheck:
    def test_it_lists_lint_warnings_with_their_paths(self, story: Recipe, web: Client) -> None:
        doc = draft(story)
        doc["steps"].append(
            {
                "key": "lonely",
                "name": "Lonely",
                "kind": "llm",
                "actor": "writer",
                "prompt": "",
                "branches": [],
            }
        )
        doc["steps"][1]["branches"].append(
            {
                "name": "end",
                "priority": 9,
                "when": {"type": "default"},
                "action": "CONTINUE",
                "target": "@complete",
            }
        )
        response = htmx_post(web, reverse("recipe-check", args=[story.slug]), doc)
        page = response.content.decode()
        assert response.status_code == 200
        assert 'data-path="steps[2]"' in page
        assert "never reached" in page
        assert [p.path for p in response.context["warnings"] if "never reached" in p.message] == [
            "steps[2]"
        ]

    def test_it_lists_errors_that_block_a_save(self, story: Recipe, web: Client) -> None:
        doc = draft(story)
        doc["steps"][0]["branches"][0]["when"]["operator"] = "lessthan"
        response = htmx_post(web, reverse("recipe-check", args=[story.slug]), doc)
        errors = response.context["errors"]
        assert [e.path for e in errors] == ["steps[0].branches[0].when.operator"]
        assert (errors[0].step, errors[0].branch) == (0, 0)

    def test_a_recipe_without_steps_is_told_to_add_one(self, story: Recipe, web: Client) -> None:
        response = htmx_post(
            web, reverse("recipe-check", args=[story.slug]), {**draft(story), "steps": []}
        )
        assert "at least 1 item" in response.content.decode()
