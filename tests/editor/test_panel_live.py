"""The side panels applied as the author types: what is right applies, each error stays beside
its field with the one-click fix that makes it right, and every actor picker offers every actor."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from editor.selectors import names_in_scope
from tests.factories import ActorFactory
from workflows.models import Recipe

from .conftest import draft, htmx_post

pytestmark = pytest.mark.django_db

WRITE = {
    "apply": "1",
    "element": "s-0",
    "step": 0,
    "key": "write",
    "name": "Write",
    "kind": "llm",
    "actor": "writer",
    "sequence": "1",
    "prompt": "Write about {topic}",
}


def live_step(web: Client, story: Recipe, document: Any = None, **fields: Any) -> Any:
    url = reverse("recipe-step-panel", args=[story.slug])
    response = htmx_post(web, url, document or draft(story), **{**WRITE, **fields})
    assert response.status_code == 200
    return response.json()


class TestStepLive:
    def test_a_valid_form_applies_whole(self, story: Recipe, web: Client) -> None:
        answer = live_step(web, story, name="Draft it")
        assert answer["result"]["step"]["name"] == "Draft it"
        assert answer["errors"] == {}
        assert answer["form_errors"] == []

    def test_an_invalid_field_is_named_once_while_the_others_apply(
        self, story: Recipe, web: Client
    ) -> None:
        answer = live_step(web, story, name="Draft it", prompt="Reply to {message}")
        step = answer["result"]["step"]
        assert step["name"] == "Draft it"
        assert step["prompt"] == "Write a story about {topic}"  # as it was
        assert list(answer["errors"]) == ["prompt"]
        assert "message" in answer["errors"]["prompt"][0]
        assert answer["form_errors"] == []

    def test_a_prompt_naming_an_undeclared_input_offers_to_declare_it(
        self, story: Recipe, web: Client
    ) -> None:
        answer = live_step(web, story, prompt="Reply to {message}")
        assert answer["fixes"]["prompt"] == [
            {"label": "Add `message` as an input", "name": "add_input", "value": "message"}
        ]
        fixed = live_step(web, story, prompt="Reply to {message}", add_input="message")
        assert fixed["errors"] == {}
        assert fixed["result"]["step"]["prompt"] == "Reply to {message}"
        assert fixed["result"]["inputs"] == {"message": {"type": "string"}}

    def test_nothing_applies_when_no_field_can_be_put_back(
        self, story: Recipe, web: Client
    ) -> None:
        answer = live_step(web, story, kind="no-such-kind", key="bad key")
        assert answer["result"]["step"]["kind"] == "llm"
        assert set(answer["errors"]) == {"kind", "key"}


class TestActorPickers:
    def test_every_picker_lists_every_actor(self, story: Recipe, web: Client) -> None:
        ActorFactory(name="other-model")
        url = reverse("recipe-step-panel", args=[story.slug])
        page = htmx_post(web, url, draft(story), step=0, element="s-0").content.decode()
        # The step actor and the judge: the aliases, then every other actor.
        assert page.count('value="+other-model"') == 2
        branch = htmx_post(
            web,
            reverse("recipe-branch-panel", args=[story.slug]),
            draft(story),
            step=0,
            branch=0,
            element="b-0",
        )
        retry_actors = dict(branch.context["form"].fields["alternative_actor"].choices)
        assert [c[0] for c in retry_actors["Add an alias for"]] == ["+other-model"]

    def test_the_evaluator_picker_lists_every_actor_and_adds_the_alias_once(
        self, story: Recipe, web: Client
    ) -> None:
        ActorFactory(name="other-model")
        url = reverse("recipe-branch-panel", args=[story.slug])
        place = {"step": 0, "branch": 2, "element": "b-2"}
        opened = htmx_post(web, url, draft(story), **place)
        form = opened.context["panel"].condition.form
        evaluators = dict(form.fields["evaluator"].choices)
        aliases = {c[0] for c in evaluators["Aliases of this recipe"]}
        assert aliases == {"writer", "judge", "editors"}
        assert [c[0] for c in evaluators["Add an alias for"]] == ["+other-model"]
        fields = {**as_posted(opened.context["panel"]), **place, "apply": "1"}
        fields.update({"c-evaluator": "+other-model", "alternative_actor": "+other-model"})
        answer = htmx_post(web, url, draft(story), **fields).json()
        assert answer["errors"] == {}
        assert answer["result"]["branch"]["when"]["evaluator"] == "other-model"
        assert answer["result"]["actors"] == {"other-model": "other-model"}

    def test_picking_an_actor_without_an_alias_adds_one_once(
        self, story: Recipe, web: Client
    ) -> None:
        ActorFactory(name="other-model")
        answer = live_step(
            web,
            story,
            actor="+other-model",
            validation_enabled="on",
            threshold="0.5",
            max_attempts="2",
            judge="+other-model",
            fallback="Sorry.",
        )
        step = answer["result"]["step"]
        assert step["actor"] == "other-model"
        assert step["validation"]["judge"] == "other-model"
        assert answer["result"]["actors"] == {"other-model": "other-model"}

    def test_a_judge_naming_an_actor_offers_its_alias(self, story: Recipe, web: Client) -> None:
        doc = draft(story)
        doc["steps"][0]["validation"] = {"threshold": 0.5, "judge": "editor-judge"}
        del doc["actors"]["judge"]
        for branch in doc["steps"][0]["branches"]:
            branch["when"].pop("evaluator", None)
        fields = {"validation_enabled": "on", "threshold": "0.5", "max_attempts": "2"}
        fields["fallback"] = "Sorry."
        answer = live_step(web, story, doc, judge="editor-judge", **fields)
        assert answer["fixes"]["judge"] == [
            {
                "label": "Add judge alias for editor-judge",
                "name": "add_alias",
                "value": "editor-judge",
            }
        ]
        fixed = live_step(web, story, doc, judge="editor-judge", add_alias="editor-judge", **fields)
        assert fixed["errors"] == {}
        assert fixed["result"]["step"]["validation"]["judge"] == "editor-judge"
        assert fixed["result"]["actors"] == {"editor-judge": "editor-judge"}


def as_posted(panel: Any) -> dict[str, Any]:
    """Return the fields a panel's forms post as opened (what the browser sends untouched)."""
    data: dict[str, Any] = {}
    for form in panel.all_forms():
        for bound in form:
            value = bound.value()
            if value is True:
                data[bound.html_name] = "on"
            elif value not in (None, False):
                data[bound.html_name] = value
    return data


class TestBranchAndRecipeLive:
    def test_an_evaluator_naming_an_actor_offers_its_alias(
        self, story: Recipe, web: Client
    ) -> None:
        doc = draft(story)
        del doc["actors"]["judge"]
        doc["steps"][0]["branches"][2]["when"]["evaluator"] = "editor-judge"
        url = reverse("recipe-branch-panel", args=[story.slug])
        place = {"step": 0, "branch": 2, "element": "b-2"}
        opened = htmx_post(web, url, doc, **place)
        fields = {**as_posted(opened.context["panel"]), **place, "apply": "1"}
        answer = htmx_post(web, url, doc, **fields).json()
        (name,) = answer["fixes"]
        assert answer["fixes"][name][0]["value"] == "editor-judge"
        assert answer["fixes"][name][0]["label"].endswith("alias for editor-judge")
        fixed = htmx_post(web, url, doc, **fields, add_alias="editor-judge").json()
        assert fixed["errors"] == {}
        assert fixed["result"]["branch"]["when"]["evaluator"] == "editor-judge"
        assert fixed["result"]["actors"] == {"editor-judge": "editor-judge"}

    def test_a_branch_applies_as_typed_with_its_errors_beside_fields(
        self, story: Recipe, web: Client
    ) -> None:
        url = reverse("recipe-branch-panel", args=[story.slug])
        opened = htmx_post(web, url, draft(story), step=0, branch=3, element="b-3")
        form = opened.context["form"]
        fields = {k: v for k, v in form.initial.items() if v is not None}
        fields.update(
            {"c-type": "default", "active": "on", "name": "", "max_retries": "", "counts_as": ""}
        )
        fields.pop("other_params", None)
        answer = htmx_post(
            web, url, draft(story), step=0, branch=3, element="b-3", apply="1", live="1", **fields
        ).json()
        assert "name" in answer["errors"]
        assert answer["result"]["branch"]["name"] == "to_review"

    def test_the_recipe_settings_apply_as_typed(self, story: Recipe, web: Client) -> None:
        url = reverse("recipe-settings-panel", args=[story.slug])
        opened = htmx_post(web, url, draft(story))
        settings = opened.context["settings"]
        data: dict[str, Any] = {"apply": "1", "name": "", "description": ""}
        for formset in (settings.inputs, settings.actors):
            data.update(
                formset.management_form.initial
                and {
                    formset.management_form.add_prefix(k): v
                    for k, v in formset.management_form.initial.items()
                }
            )
            for f in formset.forms:
                data.update({f.add_prefix(k): v for k, v in f.initial.items() if v is not None})
        answer = htmx_post(web, url, draft(story), **data).json()
        assert answer["errors"] == {"recipe-name": ["This field is required."]}
        assert answer["result"]["name"] == story.name


class TestPromptNames:
    def test_the_step_a_revise_leads_to_is_offered_the_reviewers_comment(
        self, story: Recipe
    ) -> None:
        doc = draft(story)
        doc["steps"][1]["branches"][2]["target"] = "write"
        names = {n.name: n.description for n in names_in_scope(doc, 0)}
        assert "Review sends the run here" in names["feedback"]
        assert "earlier answer" in names["steps.write.response"]
        assert "reviewers of Review" in names["steps.review.response"]
        after = {n.name: n.description for n in names_in_scope(doc, 1)}
        assert "reviewer" not in after["feedback"]


class TestSubFormErrors:
    """An invalid field of a sub-form (a condition's, an input row's) is put back as the
    element held it, so what else was typed applies."""

    def test_a_bad_condition_value_lets_the_rest_of_the_branch_apply(
        self, story: Recipe, web: Client
    ) -> None:
        url = reverse("recipe-branch-panel", args=[story.slug])
        place = {"step": 0, "branch": 0, "element": "b-0"}
        opened = htmx_post(web, url, draft(story), **place)
        fields = {**as_posted(opened.context["panel"]), **place, "apply": "1", "live": "1"}
        fields.update({"name": "much_too_short", "c-value": "abc"})
        answer = htmx_post(web, url, draft(story), **fields).json()
        assert list(answer["errors"]) == ["c-value"]
        branch = answer["result"]["branch"]
        assert branch["name"] == "much_too_short"
        assert branch["when"]["value"] == 40  # as it was

    def test_a_bad_input_row_lets_the_rest_of_the_settings_apply(
        self, story: Recipe, web: Client
    ) -> None:
        url = reverse("recipe-settings-panel", args=[story.slug])
        opened = htmx_post(web, url, draft(story))
        settings = opened.context["settings"]
        data = as_posted(settings)
        for formset in (settings.inputs, settings.actors):
            management = formset.management_form
            data.update({management.add_prefix(k): v for k, v in management.initial.items()})
        data.update({"apply": "1", "live": "1", "recipe-name": "Stories"})
        data["inputs-0-name"] = "not a name"
        answer = htmx_post(web, url, draft(story), **data).json()
        assert list(answer["errors"]) == ["inputs-0-name"]
        assert answer["result"]["name"] == "Stories"
        assert list(answer["result"]["inputs"]) == list(draft(story)["inputs"])


def test_the_panel_state_is_shown_and_said_once_per_answer(story: Recipe, web: Client) -> None:
    url = reverse("recipe-step-panel", args=[story.slug])
    page = htmx_post(web, url, draft(story), step=0, element="s-0").content.decode()
    assert "{#" not in page
    assert '<p class="panel-state" data-panel-state>' in page  # not a live region: it follows keys
    assert page.count("data-panel-announce") == 1
