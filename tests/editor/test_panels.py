"""The editor's side panels: the step, branch and recipe forms open from the document and
answer an edit with the edited piece or the errors of its fields; a file imported into the
draft replaces it."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from workflows.models import Recipe

from .conftest import draft, htmx_post, live_answer, story_document

pytestmark = pytest.mark.django_db


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
        result = live_answer(response)["result"]
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
            "inputs": {},
        }

    def test_applying_names_the_errors_by_field(self, story: Recipe, web: Client) -> None:
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
        answer = live_answer(htmx_post(web, url, draft(story), **{**fields, "prompt": "{unknown}"}))
        assert answer["result"]["step"]["prompt"] == "Write a story about {topic}"  # as it was
        assert "unknown template name 'unknown'" in " ".join(answer["errors"]["prompt"])
        answer = live_answer(htmx_post(web, url, draft(story), **{**fields, "name": ""}))
        assert answer["errors"]["name"] == ["This field is required."]

    def prompt_answer(self, story: Recipe, web: Client, doc: dict, prompt: str) -> dict:
        url = reverse("recipe-step-panel", args=[story.slug])
        fields = {"step": 0, "key": "write", "name": "Write", "kind": "llm", "actor": "writer"}
        return live_answer(
            htmx_post(web, url, doc, apply="1", sequence="1", prompt=prompt, **fields)
        )

    def test_a_prompt_naming_what_the_recipe_cannot_fill_is_refused_beside_it(
        self, story: Recipe, web: Client
    ) -> None:
        prompt = "{topic} {tone} {step9_response} {steps.nope.response}"
        answer = self.prompt_answer(story, web, draft(story), prompt)
        refused = " ".join(answer["errors"]["prompt"])
        assert "tone" in refused
        assert "step9_response" in refused
        assert "nope" in refused
        assert "'topic'" not in refused
        refused = " ".join(
            self.prompt_answer(story, web, draft(story), "{a.b}")["errors"]["prompt"]
        )
        assert "attribute access" in refused

    def test_a_file_inputs_documents_are_names_in_scope_and_checked(
        self, story: Recipe, web: Client
    ) -> None:
        doc = draft(story)
        doc["inputs"]["report"] = {"type": "file", "accept": ["application/pdf"]}
        opened = htmx_post(
            web, reverse("recipe-step-panel", args=[story.slug]), doc, step=0, element="s-0"
        ).content.decode()
        assert 'data-insert="files.report.text"' in opened
        assert 'data-insert="files.report.pages.1-2"' in opened

        answer = self.prompt_answer(story, web, doc, "{files.report.pages.2} {files.topic.text}")
        refused = " ".join(answer["errors"]["prompt"])
        assert "'topic' is not a file input" in refused
        assert "files.report.pages.2" not in refused
        answer = self.prompt_answer(story, web, doc, "{files.report.pages.0}")
        assert "'0' is not a page or a range" in " ".join(answer["errors"]["prompt"])
        applied = self.prompt_answer(story, web, doc, "{files.report.pages.2}")
        assert applied["errors"] == {}
        assert applied["result"]["step"]["prompt"] == "{files.report.pages.2}"


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

    def test_it_shows_the_band_of_the_branch_priority(self, story: Recipe, web: Client) -> None:
        url = reverse("recipe-branch-panel", args=[story.slug])
        opened = htmx_post(web, url, draft(story), step=0, branch=0, element="b-1")
        assert "Priority band: Error handling (1-10)" in opened.content.decode()
        # Typing another priority re-renders the panel with its band.
        assert 'name="priority"' in opened.content.decode()
        typed = htmx_post(
            web,
            url,
            draft(story),
            apply="1",
            _op="refresh",
            step=0,
            branch=0,
            name="short",
            priority="999",
            action="CONTINUE",
        )
        assert "Priority band: Defaults (900+)" in typed.content.decode()

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
        assert live_answer(response)["result"] == {
            "element": "b-4",
            "branch": {
                "name": "to_review",
                "priority": 999,
                "action": "HUMAN_REVIEW",
                "target": "review",
                "when": {"type": "length_check", "operator": "less_than", "value": 200},
            },
            "actors": {},
        }

    @pytest.mark.parametrize(("chosen", "written"), [("failure", "failure"), ("", None)])
    def test_what_taking_the_branch_counts_as_is_set_or_left_to_the_default(
        self, story: Recipe, web: Client, chosen: str, written: str | None
    ) -> None:
        doc = draft(story)
        doc["steps"][0]["branches"][3]["counts_as"] = "success"
        url = reverse("recipe-branch-panel", args=[story.slug])
        opened = htmx_post(web, url, doc, step=0, branch=3, element="b-4").content.decode()
        assert '<option value="success" selected>success</option>' in opened
        response = htmx_post(
            web,
            url,
            doc,
            apply="1",
            step=0,
            branch=3,
            element="b-4",
            name="to_review",
            priority="999",
            active="on",
            action="HUMAN_REVIEW",
            target="review",
            counts_as=chosen,
            **{"c-type": "default"},
        )
        assert live_answer(response)["result"]["branch"].get("counts_as") == written

    def test_it_shows_only_the_parameters_the_action_reads(
        self, story: Recipe, web: Client
    ) -> None:
        url = reverse("recipe-branch-panel", args=[story.slug])
        more_detail = htmx_post(web, url, draft(story), step=0, branch=0, element="b-1")
        approve = htmx_post(web, url, draft(story), step=0, branch=2, element="b-3")

        shown = more_detail.content.decode()
        assert 'id="id_retry_suffix"' in shown and "<textarea" in shown
        assert 'type="hidden" name="prompt_enhancement"' in shown
        assert 'type="hidden" name="alternative_actor"' in shown
        assert '<input type="number" name="max_retries" value="2"' in shown
        plain = approve.content.decode()
        for name in ("retry_suffix", "prompt_enhancement", "alternative_actor", "max_retries"):
            assert f'type="hidden" name="{name}"' in plain
        assert 'name="action" data-refresh="true"' in plain

    @pytest.mark.parametrize(
        ("action", "target", "shown"),
        [
            ("RETRY_WITH_DIFFERENT_ACTOR", "@repeat", {"alternative_actor", "max_retries"}),
            ("ENHANCE_PROMPT", "@repeat", {"prompt_enhancement", "max_retries"}),
            ("CONTINUE", "@repeat", {"max_retries"}),
            ("CONTINUE", "review", set()),
        ],
    )
    def test_a_changed_action_or_target_shows_its_parameters(
        self, story: Recipe, web: Client, action: str, target: str, shown: set[str]
    ) -> None:
        response = htmx_post(
            web,
            reverse("recipe-branch-panel", args=[story.slug]),
            draft(story),
            apply="1",
            _op="refresh",
            step=0,
            branch=0,
            name="too_short",
            priority="1",
            action=action,
            target=target,
            retry_suffix="Longer, please.",
            max_retries="2",
            **{"c-type": "length_check", "c-operator": "less_than", "c-value": "40"},
        )
        assert set(response.context["form"].shown_params) == shown

    def test_a_parameter_the_new_action_does_not_read_is_kept_as_typed(
        self, story: Recipe, web: Client
    ) -> None:
        response = htmx_post(
            web,
            reverse("recipe-branch-panel", args=[story.slug]),
            draft(story),
            apply="1",
            step=0,
            branch=0,
            element="b-1",
            name="too_short",
            priority="1",
            active="on",
            action="CONTINUE",
            target="review",
            retry_suffix="Longer, please.",
            max_retries="not a number",
            **{"c-type": "length_check", "c-operator": "less_than", "c-value": "40"},
        )
        branch = live_answer(response)["result"]["branch"]
        assert branch["params"] == {"retry_suffix": "Longer, please."}
        assert branch["action"] == "CONTINUE"


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
        assert live_answer(response)["result"]["name"] == "Renamed"


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
