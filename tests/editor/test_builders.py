"""The step panel's visual builders: a decision tree and a classify step's routes are edited
without JSON and written back unchanged when nothing was changed; the JSON view stays."""

from __future__ import annotations

import copy
import json
from html import unescape
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from editor.forms.builders import read_routes, read_tree
from workflows.adapters import document_from_recipe
from workflows.demo import REVIEWER_GROUP, recipe_files
from workflows.demo.actors import DEMO_ACTORS
from workflows.models import Actor, Recipe
from workflows.services import recipe_import

from .conftest import answer_errors, htmx_post, live_answer

pytestmark = pytest.mark.django_db


class FormFields(HTMLParser):
    """Collect what a browser would submit from a rendered form: inputs, selects, textareas."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.fields: list[tuple[str, str]] = []
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []
        self._textarea: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio"):
                if "checked" in a:
                    self.fields.append((name, a.get("value") or "on"))
            else:
                self.fields.append((name, a.get("value", "")))
        elif tag == "select" and name:
            self._select, self._options = name, []
        elif tag == "option" and self._select is not None:
            self._options.append((a.get("value", ""), "selected" in a))
        elif tag == "textarea" and name:
            self._textarea, self._text = name, ""

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select is not None:
            chosen = [v for v, s in self._options if s] or [v for v, _ in self._options[:1]]
            self.fields.append((self._select, chosen[0] if chosen else ""))
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            # The HTML parser drops a textarea's first newline, as a browser does.
            text = self._text[1:] if self._text.startswith("\n") else self._text
            self.fields.append((self._textarea, unescape(text)))
            self._textarea = None


def form_fields(html: str) -> dict[str, str]:
    parser = FormFields()
    parser.feed(html)
    return dict(parser.fields)


@pytest.fixture
def demos(author: Any) -> None:
    """Import the two demo recipes with a decision tree and routes (owned by the author)."""
    Group.objects.get_or_create(name=REVIEWER_GROUP)
    for spec in DEMO_ACTORS:
        Actor.objects.create(**spec)
    for path in recipe_files():
        if path.stem in ("regulatory-decision-tree", "document-routing"):
            recipe_import(user=author, data=path.read_bytes())


def open_step(web: Client, recipe: Recipe, key: str) -> tuple[dict[str, Any], int, dict]:
    doc = document_from_recipe(recipe)
    index = next(i for i, s in enumerate(doc["steps"]) if s["key"] == key)
    response = htmx_post(
        web, reverse("recipe-step-panel", args=[recipe.slug]), doc, step=index, element="s"
    )
    assert response.status_code == 200
    return doc, index, form_fields(response.content.decode())


def post(web: Client, recipe: Recipe, doc: dict, fields: dict[str, str], **more: str) -> Any:
    data = {**fields, **more}
    data.pop("document", None)
    return htmx_post(web, reverse("recipe-step-panel", args=[recipe.slug]), doc, **data)


BUILDER_FIELDS = ("tree", "leaf_targets", "tree_mode", "routes", "routes_mode")


def refresh(web: Client, recipe: Recipe, doc: dict, fields: dict[str, str], op: str) -> dict:
    """Press a builder button: the answer replaces the builder's fields, as in the page."""
    response = post(web, recipe, doc, fields, _op=op)
    assert response.status_code == 200
    builder = "rt" if op.startswith("rt-") else "dt"
    owned = (*BUILDER_FIELDS[:3], builder) if builder == "dt" else (*BUILDER_FIELDS[3:], builder)
    kept = {k: v for k, v in fields.items() if k not in owned and k.split("-")[0] != builder}
    return {**kept, **form_fields(response.content.decode())}


def applied_step(web: Client, recipe: Recipe, doc: dict, fields: dict[str, str]) -> dict:
    answer = live_answer(post(web, recipe, doc, fields, apply="1"))
    assert answer["errors"] == {} and answer["form_errors"] == [], answer
    return answer["result"]["step"]


class TestDecisionTreeBuilder:
    def test_it_shows_the_demo_tree_without_json(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        _, _, fields = open_step(web, recipe, "choose_prompt")

        assert fields["tree_mode"] == "builder"
        assert fields["dt-t-kind"] == "node"
        assert fields["dt-t.c-type"] == "check_safety"
        assert fields["dt-t.y-leaf"] == "safety_focused"
        assert fields["dt-t.y-target"] == "classify_safety"
        assert fields["dt-t.n.c-pii_types"].startswith("SSN, CREDIT_CARD")
        assert fields["dt-t.n.n.c-type"] == "and"
        assert fields["dt-t.n.n.c.0-field"] == "image_count"
        assert fields["dt-t.n.n.c.0-value"] == "0"

    def test_applying_it_unchanged_writes_the_same_tree(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc, index, fields = open_step(web, recipe, "choose_prompt")

        step = applied_step(web, recipe, doc, fields)

        original = {
            k: v for k, v in doc["steps"][index].items() if k not in ("branches", "position")
        }
        assert step == original
        assert json.dumps(step["tree"]) == json.dumps(original["tree"])  # key order kept too

    def test_changing_one_leaf_target_changes_only_that(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc, index, fields = open_step(web, recipe, "choose_prompt")
        fields["dt-t.n.y-target"] = "classify_base"

        step = applied_step(web, recipe, doc, fields)

        expected = copy.deepcopy(doc["steps"][index])
        expected["leaf_targets"]["pii_focused"] = "classify_base"
        assert step["leaf_targets"] == expected["leaf_targets"]
        assert step["tree"] == expected["tree"]

    def test_renaming_a_leaf_moves_its_target(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc, _, fields = open_step(web, recipe, "choose_prompt")
        fields["dt-t.y-leaf"] = "unsafe"

        step = applied_step(web, recipe, doc, fields)

        assert step["tree"]["tree"]["if_true"] == {"type": "leaf", "prompt": "unsafe"}
        assert step["leaf_targets"]["unsafe"] == "classify_safety"
        assert "safety_focused" not in step["leaf_targets"]

    def test_the_json_view_shows_the_tree_as_edited_in_the_builder(
        self, demos: None, web: Client
    ) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc, index, fields = open_step(web, recipe, "choose_prompt")
        fields["dt-t.n.n.c.0-value"] = "2"

        response = post(web, recipe, doc, fields, _op="dt-json")
        shown = form_fields(response.content.decode())

        expected = copy.deepcopy(doc["steps"][index]["tree"])
        expected["tree"]["if_false"]["if_false"]["condition"]["conditions"][0]["value"] = 2
        assert shown["tree_mode"] == "json"
        assert json.loads(shown["tree"]) == expected
        assert json.loads(shown["leaf_targets"]) == doc["steps"][index]["leaf_targets"]

    def test_an_edit_in_the_json_view_shows_in_the_builder(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc, _, fields = open_step(web, recipe, "choose_prompt")
        shown = refresh(web, recipe, doc, fields, "dt-json")
        tree = json.loads(shown["tree"])
        tree["tree"]["if_true"]["prompt"] = "stop_here"
        shown["tree"] = json.dumps(tree)

        back = refresh(web, recipe, doc, shown, "dt-builder")

        assert back["tree_mode"] == "builder"
        assert back["dt-t.y-leaf"] == "stop_here"
        assert back["dt-t.n.y-target"] == "classify_pii"

    def test_json_that_does_not_parse_stays_in_the_json_view(
        self, demos: None, web: Client
    ) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc, _, fields = open_step(web, recipe, "choose_prompt")
        fields.update(tree_mode="json", tree="{oops")

        response = post(web, recipe, doc, fields, _op="dt-builder")

        page = response.content.decode()
        assert form_fields(page)["tree"] == "{oops"
        assert "Not JSON" in page

    def test_a_leaf_turned_into_a_question_gets_two_leaves(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc, _, fields = open_step(web, recipe, "choose_prompt")
        fields["dt-t.y-kind"] = "node"

        shown = refresh(web, recipe, doc, fields, "dt-refresh")

        assert shown["dt-t.y-kind"] == "node"
        assert shown["dt-t.y.y-leaf"] == "safety_focused"
        assert shown["dt-t.y.y-target"] == "classify_safety"
        assert shown["dt-t.y.n-leaf"] == "otherwise"

    def test_the_and_buttons_add_and_remove_operands(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc, _, fields = open_step(web, recipe, "choose_prompt")

        added = refresh(web, recipe, doc, fields, "dt-add:t.n.n.c")
        assert added["dt-t.n.n.c-count"] == "3"
        removed = refresh(web, recipe, doc, added, "dt-remove:t.n.n.c.0")

        assert removed["dt-t.n.n.c-count"] == "2"
        assert removed["dt-t.n.n.c.0-type"] == "check_keywords"

    def test_a_plain_condition_turned_into_and_becomes_its_first_operand(self) -> None:
        data = {
            "dt-t-kind": "node",
            "dt-t-prev": "node",
            "dt-t.c-type": "or",
            "dt-t.c-prev": "check_keywords",
            "dt-t.c-keywords": "fraud, recall",
            "dt-t.y-kind": "leaf",
            "dt-t.y-leaf": "a",
            "dt-t.n-kind": "leaf",
            "dt-t.n-leaf": "b",
            "dt-t.n-target": "@end",
        }

        tree, targets = read_tree(data, None, None)

        assert tree["condition"] == {
            "type": "or",
            "conditions": [{"type": "check_keywords", "keywords": ["fraud", "recall"]}],
        }
        assert targets == {"b": "@end"}

    def test_the_trees_fallback_and_its_target_are_kept(self) -> None:
        data = {
            "dt-t-kind": "node",
            "dt-t-prev": "node",
            "dt-t.c-type": "check_safety",
            "dt-t.c-prev": "check_safety",
            "dt-t.y-kind": "leaf",
            "dt-t.y-leaf": "a",
            "dt-t.n-kind": "leaf",
            "dt-t.n-leaf": "b",
        }
        base = {"version": "1.0", "fallback": "review", "tree": {"type": "leaf", "prompt": "a"}}

        tree, targets = read_tree(data, base, {"review": "@end"})

        assert tree["fallback"] == "review" and tree["tree"]["type"] == "node"
        assert targets == {"review": "@end"}

    def test_an_invalid_tree_opens_in_the_json_view(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc = document_from_recipe(recipe)
        index = next(i for i, s in enumerate(doc["steps"]) if s["key"] == "choose_prompt")
        doc["steps"][index]["tree"] = {"type": "node"}

        response = htmx_post(web, reverse("recipe-step-panel", args=[recipe.slug]), doc, step=index)

        page = response.content.decode()
        assert form_fields(page)["tree_mode"] == "json"
        assert "can only be edited as JSON" in page

    def test_a_builder_error_is_shown_with_its_path(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="regulatory-decision-tree")
        doc, _, fields = open_step(web, recipe, "choose_prompt")
        fields["dt-t.n.n.c.0-value"] = "many"

        answer = live_answer(post(web, recipe, doc, fields, apply="1"))

        assert answer["result"] is None
        assert (
            "if_false.if_false.condition.conditions.0.value: must be a number, got 'many'"
            in answer_errors(answer)
        )


class TestRoutesTable:
    def test_it_shows_the_routes_as_rows_with_their_targets(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="document-routing")
        _, _, fields = open_step(web, recipe, "classify_document")
        response_page = post(
            web, recipe, *open_step(web, recipe, "classify_document")[::2], _op="rt-refresh"
        ).content.decode()

        assert fields["routes_mode"] == "builder"
        assert fields["rt-0-name"] == "invoice"
        assert fields["rt-0-ex-0-selected"] == "on"
        assert "rt-0-ex-1-selected" not in fields
        assert "<code>process_invoice</code>" in response_page

    def test_applying_it_unchanged_writes_the_same_routes(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="document-routing")
        doc, index, fields = open_step(web, recipe, "classify_document")

        step = applied_step(web, recipe, doc, fields)

        assert json.dumps(step["routes"]) == json.dumps(doc["steps"][index]["routes"])

    def test_editing_a_row_changes_only_that_route(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="document-routing")
        doc, index, fields = open_step(web, recipe, "classify_document")
        fields["rt-1-instructions"] = "Select for contracts."
        fields["rt-1-always_active"] = "on"

        step = applied_step(web, recipe, doc, fields)

        expected = copy.deepcopy(doc["steps"][index]["routes"])
        expected[1].update(instructions="Select for contracts.", always_active=True)
        assert step["routes"] == expected

    def test_a_route_added_and_filled_in_is_written(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="document-routing")
        doc, index, fields = open_step(web, recipe, "classify_document")
        shown = refresh(web, recipe, doc, fields, "rt-add")
        n = len(doc["steps"][index]["routes"])
        shown[f"rt-{n}-name"] = "spam"
        shown = refresh(web, recipe, doc, shown, f"rt-example:{n}")
        shown[f"rt-{n}-ex-0-text"] = "Win a prize!"

        step = applied_step(web, recipe, doc, {**fields, **shown})

        assert step["routes"][:n] == doc["steps"][index]["routes"]
        assert step["routes"][n] == {
            "name": "spam",
            "instructions": "",
            "examples": [{"text": "Win a prize!", "selected": True}],
        }

    def test_removing_a_route_drops_it(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="document-routing")
        doc, index, fields = open_step(web, recipe, "classify_document")
        shown = refresh(web, recipe, doc, fields, "rt-remove:0")

        routes = read_routes(shown, json.loads(shown["routes"]))

        assert routes == doc["steps"][index]["routes"][1:]

    def test_the_json_view_round_trips_with_the_table(self, demos: None, web: Client) -> None:
        recipe = Recipe.objects.get(slug="document-routing")
        doc, index, fields = open_step(web, recipe, "classify_document")
        shown = refresh(web, recipe, doc, fields, "rt-json")
        assert json.loads(shown["routes"]) == doc["steps"][index]["routes"]
        routes = json.loads(shown["routes"])
        routes[0]["name"] = "bill"
        shown["routes"] = json.dumps(routes)

        back = refresh(web, recipe, doc, shown, "rt-builder")

        assert back["routes_mode"] == "builder"
        assert back["rt-0-name"] == "bill"
