"""The editor pages and panels: access, every panel's answers, and bad input never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from editor.models import RecipeTest
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish, recipe_update

from .conftest import draft, htmx_post, story_document

pytestmark = pytest.mark.django_db

PAGES = ["recipe-editor", "recipe-versions", "recipe-tests"]
PANELS = [
    "recipe-check",
    "recipe-step-panel",
    "recipe-prompt-check",
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
        assert b"No steps yet" in page.content

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
    def test_it_embeds_the_draft_and_the_step_list(self, story: Recipe, web: Client) -> None:
        response = web.get(reverse("recipe-editor", args=[story.slug]))
        page = response.content.decode()
        assert response.status_code == 200
        assert 'id="recipe-document"' in page
        assert 'data-path="steps[0].branches[1]"' in page
        assert "len &lt; 40" in page
        assert response.context["config"]["revision"] == story.revision

    def test_it_escapes_what_authors_wrote(
        self, author: Any, story_actors: None, web: Client
    ) -> None:
        doc = story_document(name="</script><script>alert(1)</script>")
        doc["steps"][0]["name"] = "<img src=x onerror=alert(1)>"
        recipe = recipe_import(user=author, data=doc).recipe
        page = web.get(reverse("recipe-editor", args=[recipe.slug])).content.decode()
        assert "<img src=x" not in page
        assert "</script><script>alert(1)" not in page
        assert "&lt;img src=x onerror=alert(1)&gt;" in page


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
        assert 'hx-swap-oob="true"' in page
        assert "Lonely" in page
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


NOT_A_DOCUMENT = [
    {"document": "{not json"},
    {"document": "[1, 2]"},
    {"document": '{"steps": "no"}'},
    {"document": '{"steps": [1]}'},
    {},
]
BAD_PLACES = [
    {"document": '{"steps": [{"key": "a"}]}', "step": "7"},
    {"document": '{"steps": [{"key": "a"}]}', "step": "-1"},
    {"document": '{"steps": [{"key": "a"}]}', "step": "x"},
]
BAD_BRANCHES = [
    {"document": '{"steps": [{"key": "a", "branches": "x"}]}', "step": "0", "branch": "0"},
    {"document": '{"steps": [{"key": "a", "branches": []}]}', "step": "0", "branch": "0"},
    {"document": '{"steps": [{"key": "a", "branches": [1]}]}', "step": "0", "branch": "0"},
]
DOCUMENT_PANELS = [
    "recipe-check",
    "recipe-step-panel",
    "recipe-branch-panel",
    "recipe-settings-panel",
    "recipe-prompt-check",
]


def logged_in(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


class TestBadInput:
    @pytest.mark.parametrize("name", DOCUMENT_PANELS)
    @pytest.mark.parametrize("data", NOT_A_DOCUMENT)
    def test_a_document_that_is_not_one_gets_a_400(
        self, story: Recipe, author: Any, name: str, data: dict
    ) -> None:
        response = logged_in(author).post(reverse(name, args=[story.slug]), {"apply": "1", **data})
        assert response.status_code == 400
        assert b"Reload the page" in response.content

    @pytest.mark.parametrize("name", ["recipe-step-panel", "recipe-branch-panel"])
    @pytest.mark.parametrize("data", BAD_PLACES)
    def test_a_step_that_is_not_there_gets_a_400(
        self, story: Recipe, author: Any, name: str, data: dict
    ) -> None:
        response = logged_in(author).post(reverse(name, args=[story.slug]), {"apply": "1", **data})
        assert response.status_code == 400

    @pytest.mark.parametrize("data", BAD_BRANCHES)
    def test_a_branch_that_is_not_there_gets_a_400(
        self, story: Recipe, author: Any, data: dict
    ) -> None:
        url = reverse("recipe-branch-panel", args=[story.slug])
        assert logged_in(author).post(url, {"apply": "1", **data}).status_code == 400

    @pytest.mark.parametrize(
        "step",
        [
            {
                "key": 5,
                "name": ["x"],
                "kind": "robot",
                "actor": 3,
                "prompt": None,
                "validation": "yes",
                "tree": 1,
                "routes": {"a": 1},
                "options": "approve",
            },
            {},
        ],
    )
    def test_a_step_full_of_wrong_types_opens_and_applies_without_a_500(
        self, story: Recipe, author: Any, step: dict
    ) -> None:
        client = logged_in(author)
        url = reverse("recipe-step-panel", args=[story.slug])
        doc = json.dumps({"steps": [step]})
        assert client.post(url, {"document": doc, "step": "0"}).status_code == 200
        applied = client.post(
            url,
            {
                "document": doc,
                "step": "0",
                "apply": "1",
                "key": "a",
                "name": "A",
                "kind": "llm",
                "sequence": "1",
            },
        )
        assert applied.status_code == 200

    def test_a_branch_full_of_wrong_types_opens_and_applies_without_a_500(
        self, story: Recipe, author: Any
    ) -> None:
        client = logged_in(author)
        url = reverse("recipe-branch-panel", args=[story.slug])
        doc = json.dumps(
            {
                "steps": [
                    {
                        "key": "a",
                        "branches": [
                            {"name": 1, "priority": "high", "when": [1], "action": 5, "params": "x"}
                        ],
                    }
                ]
            }
        )
        assert client.post(url, {"document": doc, "step": "0", "branch": "0"}).status_code == 200
        applied = client.post(
            url,
            {
                "document": doc,
                "step": "0",
                "branch": "0",
                "apply": "1",
                "c-type": "and",
                "c-count": "999999",
                "name": "b",
                "priority": "1",
                "action": "CONTINUE",
            },
        )
        assert applied.status_code == 200

    def test_a_check_of_a_document_full_of_wrong_types_lists_errors(
        self, story: Recipe, web: Client
    ) -> None:
        doc = {
            "name": 5,
            "inputs": [],
            "actors": "x",
            "steps": [{"key": 3, "kind": "robot", "branches": [{"when": [], "priority": "high"}]}],
        }
        response = htmx_post(web, reverse("recipe-check", args=[story.slug]), doc)
        assert response.status_code == 200
        assert len(response.context["errors"]) >= 4

    def test_get_is_not_allowed_on_panels(self, story: Recipe, web: Client) -> None:
        assert web.get(reverse("recipe-step-panel", args=[story.slug])).status_code == 405


class TestStepPanel:
    def test_it_opens_with_the_names_in_scope(self, story: Recipe, web: Client) -> None:
        response = htmx_post(
            web,
            reverse("recipe-step-panel", args=[story.slug]),
            draft(story),
            step=1,
            element="s-1",
        )
        page = response.content.decode()
        assert response.status_code == 200
        assert 'data-insert="topic"' in page
        assert 'data-insert="step1_response"' in page
        assert 'data-insert="steps.write.response"' in page
        assert 'name="element" value="s-1"' in page
        assert "panel-result" not in page

    def test_applying_answers_with_the_new_step(self, story: Recipe, web: Client) -> None:
        doc = draft(story)
        response = htmx_post(
            web,
            reverse("recipe-step-panel", args=[story.slug]),
            doc,
            apply="1",
            element="s-1",
            step=0,
            key="draft",
            name="Draft",
            kind="llm",
            actor="writer",
            sequence="2",
            prompt="Write about {topic}",
        )
        result = response.context["result"]
        assert result == {
            "element": "s-1",
            "step": {
                "key": "draft",
                "name": "Draft",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Write about {topic}",
            },
            "sequence": 2,
            "actors": {},
        }
        assert 'id="panel-result"' in response.content.decode()

    def test_applying_shows_errors_inline(self, story: Recipe, web: Client) -> None:
        url = reverse("recipe-step-panel", args=[story.slug])
        fields = {
            "step": 0,
            "key": "write",
            "name": "Write",
            "kind": "llm",
            "actor": "writer",
            "sequence": "1",
            "apply": "1",
        }
        response = htmx_post(web, url, draft(story), **{**fields, "prompt": "{unknown}"})
        page = response.content.decode()
        assert response.context["result"] is None
        assert "unknown template name &#x27;unknown&#x27;" in page
        assert "Unknown template name {unknown}" in page
        response = htmx_post(web, url, draft(story), **{**fields, "name": ""})
        assert "This field is required" in response.content.decode()

    def test_the_prompt_check_flags_unknown_names(self, story: Recipe, web: Client) -> None:
        url = reverse("recipe-prompt-check", args=[story.slug])
        response = htmx_post(
            web, url, draft(story), prompt="{topic} {tone} {step9_response} {steps.nope.response}"
        )
        page = response.content.decode()
        assert "{tone}: not an input" in page
        assert "{step9_response}: the recipe has 2 steps" in page
        assert "there is no step &#x27;nope&#x27;" in page
        assert "{topic}" not in page
        refused = htmx_post(web, url, draft(story), prompt="{a.b}").content.decode()
        assert "attribute access" in refused


class TestBranchPanel:
    def test_it_opens_with_the_condition_builder(self, story: Recipe, web: Client) -> None:
        response = htmx_post(
            web,
            reverse("recipe-branch-panel", args=[story.slug]),
            draft(story),
            step=0,
            branch=2,
            element="b-1",
        )
        page = response.content.decode()
        assert 'name="c-type"' in page
        assert 'value="judge" selected' in page
        assert "Rate story quality 1-10" in page

    def test_a_builder_button_re_renders_without_errors(self, story: Recipe, web: Client) -> None:
        response = htmx_post(
            web,
            reverse("recipe-branch-panel", args=[story.slug]),
            draft(story),
            apply="1",
            _op="refresh",
            step=0,
            branch=0,
            name="",
            priority="1",
            action="CONTINUE",
            **{
                "c-type": "not",
                "c-prev_type": "length_check",
                "c-operator": "less_than",
                "c-value": "40",
                "c-count": "0",
            },
        )
        page = response.content.decode()
        assert response.context["result"] is None
        assert "This field is required" not in page
        assert 'name="c.0-type"' in page
        assert 'name="c.0-value"' in page

    def test_applying_answers_with_the_new_branch(self, story: Recipe, web: Client) -> None:
        response = htmx_post(
            web,
            reverse("recipe-branch-panel", args=[story.slug]),
            draft(story),
            apply="1",
            step=0,
            branch=3,
            element="b-4",
            name="to_review",
            priority="999",
            active="on",
            action="HUMAN_REVIEW",
            target="review",
            **{"c-type": "length_check", "c-operator": "less_than", "c-value": "200"},
        )
        assert response.context["result"] == {
            "element": "b-4",
            "branch": {
                "name": "to_review",
                "priority": 999,
                "action": "HUMAN_REVIEW",
                "target": "review",
                "when": {"type": "length_check", "operator": "less_than", "value": 200},
            },
        }


class TestRecipePanel:
    def test_it_opens_and_applies(self, story: Recipe, web: Client) -> None:
        url = reverse("recipe-settings-panel", args=[story.slug])
        opened = htmx_post(web, url, draft(story))
        assert 'name="actors-0-alias"' in opened.content.decode()
        response = htmx_post(
            web,
            url,
            draft(story),
            apply="1",
            **{
                "recipe-name": "Renamed",
                "recipe-description": "",
                "inputs-TOTAL_FORMS": "1",
                "inputs-INITIAL_FORMS": "1",
                "inputs-0-name": "topic",
                "inputs-0-type": "string",
                "inputs-0-required": "on",
                "actors-TOTAL_FORMS": "3",
                "actors-INITIAL_FORMS": "3",
                "actors-0-alias": "writer",
                "actors-0-reference": "editor-writer",
                "actors-1-alias": "judge",
                "actors-1-reference": "editor-judge",
                "actors-2-alias": "editors",
                "actors-2-reference": "@human:editor-reviewers",
            },
        )
        assert response.context["result"]["name"] == "Renamed"


class TestDraftImport:
    def upload(self, doc: dict) -> SimpleUploadedFile:
        return SimpleUploadedFile("r.json", json.dumps(doc).encode(), "application/json")

    def test_it_replaces_the_draft_and_reloads(self, story: Recipe, web: Client) -> None:
        doc = story_document(slug="any-slug", name="From a file")
        response = web.post(
            reverse("recipe-draft-import", args=[story.slug]),
            {"file": self.upload(doc), "revision": str(story.revision)},
            HTTP_HX_REQUEST="true",
        )
        assert response.status_code == 200
        assert response["HX-Refresh"] == "true"
        story.refresh_from_db()
        assert story.name == "From a file"

    def test_it_reports_a_stale_revision(self, story: Recipe, web: Client) -> None:
        response = web.post(
            reverse("recipe-draft-import", args=[story.slug]),
            {"file": self.upload(story_document()), "revision": "99"},
            HTTP_HX_REQUEST="true",
        )
        assert "saved elsewhere" in response.content.decode()

    def test_it_lists_the_errors_of_a_bad_file(self, story: Recipe, web: Client) -> None:
        response = web.post(
            reverse("recipe-draft-import", args=[story.slug]),
            {"file": SimpleUploadedFile("r.yaml", b"steps: []\n")},
            HTTP_HX_REQUEST="true",
        )
        page = response.content.decode()
        assert response.status_code == 200
        assert "The file was not imported" in page
        assert "format" in page


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
    def test_it_asks_to_publish_first(self, story: Recipe, web: Client) -> None:
        response = htmx_post(web, reverse("recipe-testrun", args=[story.slug]), None)
        assert "Publish the recipe" in response.content.decode()

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


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
KEYS = st.sampled_from(
    [
        "name",
        "key",
        "kind",
        "actor",
        "prompt",
        "branches",
        "when",
        "type",
        "operator",
        "value",
        "conditions",
        "priority",
        "action",
        "target",
        "params",
        "tree",
        "routes",
        "validation",
    ]
)
STEPISH = st.recursive(
    JSON,
    lambda inner: st.dictionaries(KEYS, inner, max_size=6) | st.lists(inner, max_size=3),
    max_leaves=20,
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(STEPISH, min_size=1, max_size=3), inputs=JSON, actors=JSON)
def test_no_document_makes_a_panel_fail(
    story: Recipe, author: Any, steps: list, inputs: Any, actors: Any
) -> None:
    client = logged_in(author)
    doc = json.dumps({"steps": steps, "inputs": inputs, "actors": actors, "name": "x"})
    for name, extra in (
        ("recipe-check", {}),
        ("recipe-step-panel", {"step": "0"}),
        (
            "recipe-step-panel",
            {"step": "0", "apply": "1", "key": "a", "name": "A", "kind": "llm", "sequence": "1"},
        ),
        ("recipe-branch-panel", {"step": "0", "branch": "0"}),
        ("recipe-settings-panel", {}),
        ("recipe-prompt-check", {"prompt": "{x} {{ {y.z}"}),
    ):
        response = client.post(reverse(name, args=[story.slug]), {"document": doc, **extra})
        assert response.status_code in (200, 400), (name, response.status_code)


FIELD_NAMES = st.sampled_from(
    [
        "name",
        "priority",
        "active",
        "action",
        "target",
        "retry_suffix",
        "max_retries",
        "alternative_actor",
        "other_params",
        "c-type",
        "c-prev_type",
        "c-operator",
        "c-value",
        "c-flags",
        "c-unit",
        "c-evaluator",
        "c-field",
        "c-extra",
        "c-count",
        "c.0-type",
        "c.0-prev_type",
        "c.0-count",
        "c.0.0-type",
        "c.0-value",
        "c.1-type",
        "_op",
        "key",
        "kind",
        "actor",
        "prompt",
        "sequence",
        "timeout_s",
        "validation_enabled",
        "threshold",
        "judge",
        "tree",
        "routes",
        "leaf_targets",
        "options",
    ]
)
FIELD_VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "and",
            "or",
            "not",
            "length_check",
            "pattern_match",
            "default",
            "5",
            "-1",
            "999999",
            "add:c",
            "remove:c.0",
            "refresh",
            "[]",
            "{}",
            '{"a": 1}',
            "+x",
            "REQUEST_MORE_DETAIL",
            "@repeat",
            "review",
            "true",
            "(a",
        ]
    ),
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(fields=st.dictionaries(FIELD_NAMES, FIELD_VALUES, max_size=14))
def test_no_form_input_makes_a_panel_fail(story: Recipe, author: Any, fields: dict) -> None:
    client = logged_in(author)
    doc = json.dumps(draft(story))
    for name, place in (
        ("recipe-step-panel", {"step": "0"}),
        ("recipe-branch-panel", {"step": "0", "branch": "2"}),
    ):
        response = client.post(
            reverse(name, args=[story.slug]), {"document": doc, "apply": "1", **place, **fields}
        )
        assert response.status_code == 200, (name, fields)
