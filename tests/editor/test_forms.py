"""The side-panel forms: each returns the edited piece of the document, or inline errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import QueryDict

from editor.catalog import new_operand
from editor.forms.branch import BranchForm, BranchPanel
from editor.forms.condition_tree import initial_tree, posted_tree, tree_apply
from editor.forms.document import DocumentContext
from editor.forms.recipe import ImportForm, RecipeSettings
from editor.forms.step import StepForm
from editor.forms.testrun import split_answers
from tests.factories import ActorFactory

from .conftest import story_document

pytestmark = pytest.mark.django_db


def step_data(doc: dict[str, Any], index: int, **changes: Any) -> QueryDict:
    initial = StepForm.initial_from(doc["steps"][index])
    data = {k: v for k, v in initial.items() if v not in (None, False)}
    data["sequence"] = index + 1
    for key in ("tree", "leaf_targets", "routes"):
        data.pop(key, None)
    data.update(changes)
    query = QueryDict(mutable=True)
    for key, value in data.items():
        query[key] = str(value) if not isinstance(value, bool) else "on"
    return query


def condition_data(when: dict[str, Any], prefix: str = "c") -> dict[str, Any]:
    """Flatten a condition document into the builder's form fields."""
    tree = initial_tree(when)
    out: dict[str, Any] = {}

    def walk(node: dict[str, Any], p: str) -> None:
        for key, value in node["initial"].items():
            if key == "flags":
                out[f"{p}-flags"] = value
            elif value not in (None, ""):
                out[f"{p}-{key}"] = str(value)
        out[f"{p}-count"] = str(len(node["children"]))
        for k, child in enumerate(node["children"]):
            walk(child, f"{p}.{k}")

    walk(tree, prefix)
    return out


def branch_data(doc: dict[str, Any], step: int, branch: int, **changes: Any) -> QueryDict:
    original = doc["steps"][step]["branches"][branch]
    data: dict[str, Any] = {
        "name": original["name"],
        "priority": str(original["priority"]),
        "action": original["action"],
        "target": original.get("target", ""),
    }
    if original.get("active", True):
        data["active"] = "on"
    params = original.get("params", {})
    for key in ("retry_suffix", "prompt_enhancement", "alternative_actor", "max_retries"):
        if key in params:
            data[key] = str(params[key])
    data.update(condition_data(changes.pop("when", original["when"])))
    data.update(changes)
    query = QueryDict(mutable=True)
    for key, value in data.items():
        if isinstance(value, list):
            query.setlist(key, value)
        else:
            query[key] = value
    return query


class TestStepForm:
    def test_it_returns_the_edited_step(self, story: Any) -> None:
        doc = story_document()
        form = StepForm(
            step_data(doc, 0, name="Write it", prompt="Write about {topic}\r\nthen stop."),
            context=DocumentContext(doc),
            index=0,
        )
        assert form.is_valid(), form.errors
        assert form.result == {
            "key": "write",
            "name": "Write it",
            "kind": "llm",
            "actor": "writer",
            "prompt": "Write about {topic}\nthen stop.",
        }

    def test_it_keeps_the_document_unchanged_when_nothing_is_edited(self, story: Any) -> None:
        doc = story_document()
        doc["steps"][0]["validation"] = {
            "threshold": 0.8,
            "max_attempts": 3,
            "judge": "judge",
            "fallback": "Sorry.",
        }
        doc["steps"][0]["timeout_s"] = 60
        form = StepForm(
            step_data(doc, 0, validation_enabled=True), context=DocumentContext(doc), index=0
        )
        assert form.is_valid(), form.errors
        expected = {k: v for k, v in doc["steps"][0].items() if k not in ("branches", "position")}
        assert form.result == expected

    @pytest.mark.parametrize(
        ("changes", "field", "message"),
        [
            ({"key": "review"}, "key", "Another step is called 'review'"),
            ({"key": "bad key!"}, "key", "Use letters"),
            ({"prompt": "Hi {nobody}"}, "prompt", "unknown template name 'nobody'"),
            ({"prompt": "Hi {x.__class__}"}, "prompt", "attribute access"),
            ({"actor": ""}, "actor", "is required"),
            ({"actor": "editors"}, "actor", "is a reviewer group"),
            ({"timeout_s": "0"}, "timeout_s", "greater than or equal to 1"),
            ({"sequence": "9"}, "sequence", "less than or equal to 2"),
            (
                {"validation_enabled": True, "threshold": "2"},
                "threshold",
                "less than or equal to 1",
            ),
        ],
    )
    def test_it_shows_errors_beside_their_field(
        self, story: Any, changes: dict, field: str, message: str
    ) -> None:
        doc = story_document()
        form = StepForm(step_data(doc, 0, **changes), context=DocumentContext(doc), index=0)
        assert not form.is_valid()
        assert any(message in e for e in form.errors[field]), form.errors

    def test_it_adds_an_alias_when_a_new_actor_is_chosen(self, story: Any) -> None:
        ActorFactory(name="poet:latest")
        doc = story_document()
        form = StepForm(
            step_data(doc, 0, actor="+poet:latest"), context=DocumentContext(doc), index=0
        )
        assert form.is_valid(), form.errors
        assert form.actors_added == {"poet": "poet:latest"}
        assert form.result["actor"] == "poet"

    def test_it_writes_a_human_steps_escalation(self, story: Any) -> None:
        doc = story_document()
        context = DocumentContext(doc)
        form = StepForm(step_data(doc, 1, escalate_to="editors"), context=context, index=1)
        assert form.is_valid(), form.errors
        assert form.result["escalate_to"] == "editors"
        form = StepForm(step_data(doc, 1, escalate_to="writer"), context=context, index=1)
        assert not form.is_valid()
        assert "'writer' is not a reviewer group alias" in form.errors["escalate_to"][0]
        form = StepForm(step_data(doc, 1), context=context, index=1)
        assert form.is_valid(), form.errors
        assert "escalate_to" not in form.result

    def test_it_accepts_a_renamed_key_that_other_branches_lead_to(self, story: Any) -> None:
        doc = story_document()
        form = StepForm(step_data(doc, 1, key="check"), context=DocumentContext(doc), index=1)
        assert form.is_valid(), form.errors
        assert form.result["key"] == "check"


class TestConditionBuilder:
    def test_it_round_trips_nested_conditions_through_its_fields(self, story: Any) -> None:
        doc = story_document()
        when = {
            "type": "and",
            "conditions": [
                {"type": "length_check", "operator": "greater_equal", "value": 10, "unit": "words"},
                {
                    "type": "or",
                    "conditions": [
                        {
                            "type": "pattern_match",
                            "operator": "regex_match",
                            "value": "dragon",
                            "flags": "i",
                        },
                        {
                            "type": "not",
                            "conditions": [
                                {"type": "execution_error", "operator": "equals", "value": True},
                            ],
                        },
                    ],
                },
                {
                    "type": "ai_evaluation",
                    "operator": "greater_than_or_equal",
                    "value": 7.5,
                    "evaluator": "judge",
                    "prompt": "Rate it",
                },
                {"type": "content_type", "operator": "is", "value": "prose"},
                {"type": "field_compare", "operator": "less_than", "field": "data.n", "value": 3},
            ],
        }
        panel = BranchPanel(
            context=DocumentContext(doc),
            step_index=0,
            branch_index=0,
            data=branch_data(doc, 0, 0, when=when),
        )
        assert panel.is_valid(), (panel.form.errors, panel.condition.has_errors)
        assert panel.result["when"] == when

    def test_it_keeps_the_reference_spelling_of_a_logical_condition(self, story: Any) -> None:
        doc = story_document()
        when = {
            "type": "check_both",
            "operator": "and",
            "conditions": [{"type": "default"}, {"type": "default"}],
        }
        panel = BranchPanel(
            context=DocumentContext(doc),
            step_index=0,
            branch_index=3,
            data=branch_data(doc, 0, 3, when=when),
        )
        assert panel.is_valid()
        assert panel.result["when"] == when

    def test_it_shows_an_engine_error_beside_the_nested_field(self, story: Any) -> None:
        doc = story_document()
        when = {
            "type": "or",
            "conditions": [
                {"type": "default"},
                {"type": "pattern_match", "operator": "regex_match", "value": "(a"},
            ],
        }
        panel = BranchPanel(
            context=DocumentContext(doc),
            step_index=0,
            branch_index=0,
            data=branch_data(doc, 0, 0, when=when),
        )
        assert not panel.is_valid()
        nested = panel.condition.children[1].form
        assert "invalid regex" in nested.errors["value"][0]

    @pytest.mark.parametrize(
        ("when", "field", "message"),
        [
            (
                {"type": "length_check", "operator": "less_than", "value": "many"},
                "value",
                "must be a number, got 'many'",
            ),
            (
                {"type": "pattern_match", "operator": "contains", "value": ""},
                "value",
                "This field is required.",
            ),
            (
                {"type": "field_compare", "operator": "less_than", "value": 1},
                "field",
                "This field is required.",
            ),
            (
                {"type": "execution_error", "operator": "contains", "value": ""},
                "value",
                "must be the text to look for in the error",
            ),
        ],
    )
    def test_it_refuses_incomplete_conditions_beside_the_field(
        self, story: Any, when: dict, field: str, message: str
    ) -> None:
        doc = story_document()
        panel = BranchPanel(
            context=DocumentContext(doc),
            step_index=0,
            branch_index=0,
            data=branch_data(doc, 0, 0, when=when),
        )
        assert not panel.is_valid()
        assert panel.condition.form.errors[field] == [message]

    def test_a_leaf_turned_into_and_becomes_its_first_operand(self) -> None:
        data = QueryDict(mutable=True)
        data.update(
            {
                "c-type": "and",
                "c-prev_type": "length_check",
                "c-operator": "less_than",
                "c-value": "200",
                "c-count": "0",
            }
        )
        tree = posted_tree(data)
        assert tree["initial"]["type"] == "and"
        child = tree["children"][0]["initial"]
        assert (child["type"], child["operator"], child["value"]) == (
            "length_check",
            "less_than",
            "200",
        )

    def test_buttons_add_and_remove_operands(self) -> None:
        tree = initial_tree({"type": "or", "conditions": [{"type": "default"}]})
        tree = tree_apply(tree, "add:c")
        assert len(tree["children"]) == 2
        tree = tree_apply(tree, "remove:c.0")
        added = tree["children"][0]["initial"]
        assert (added["type"], added["operator"]) == (
            new_operand()["type"],
            new_operand()["operator"],
        )
        tree = tree_apply(tree, "remove:c.0")
        assert len(tree["children"]) == 1  # a combination keeps one operand

    def test_a_changed_type_gets_an_operator_it_accepts(self) -> None:
        data = QueryDict(mutable=True)
        data.update(
            {
                "c-type": "content_type",
                "c-prev_type": "length_check",
                "c-operator": "less_than",
                "c-count": "0",
            }
        )
        assert posted_tree(data)["initial"]["operator"] == "is"


class TestBranchForm:
    def test_it_points_a_repeating_action_at_repeat(self, story: Any) -> None:
        doc = story_document()
        data = branch_data(doc, 0, 3, action="REQUEST_MORE_DETAIL", target="review")
        panel = BranchPanel(context=DocumentContext(doc), step_index=0, branch_index=3, data=data)
        assert panel.is_valid(), panel.form.errors
        assert panel.result["target"] == "@repeat"
        assert "runs this step again" in panel.form.notes[0]

    def test_it_accepts_a_priority_another_branch_has(self, story: Any) -> None:
        doc = story_document()
        panel = BranchPanel(
            context=DocumentContext(doc),
            step_index=0,
            branch_index=3,
            data=branch_data(doc, 0, 3, priority="2"),
        )
        assert panel.is_valid(), panel.form.errors
        assert panel.result is not None and panel.result["priority"] == 2

    @pytest.mark.parametrize(
        ("priority", "band"),
        [
            ("5", "Error handling (1-10)"),
            ("20", "Quality gates (11-50)"),
            ("60", "Flow control (51-100)"),
            ("200", "in no band (between 51-100 and 900+)"),
            ("999", "Defaults (900+)"),
        ],
    )
    def test_it_shows_the_band_of_the_priority(self, story: Any, priority: str, band: str) -> None:
        doc = story_document()
        panel = BranchPanel(
            context=DocumentContext(doc),
            step_index=0,
            branch_index=3,
            data=branch_data(doc, 0, 3, priority=priority),
        )
        assert panel.form.priority_band == band
        assert "error handling 1-10, quality gates 11-50" in panel.form.fields["priority"].help_text

    def test_it_keeps_params_it_does_not_know(self, story: Any) -> None:
        doc = story_document()
        data = branch_data(doc, 0, 0, other_params='{"note": "keep me"}')
        panel = BranchPanel(context=DocumentContext(doc), step_index=0, branch_index=0, data=data)
        assert panel.is_valid(), panel.form.errors
        assert panel.result["params"] == {
            "note": "keep me",
            "retry_suffix": "Longer, please.",
            "max_retries": 2,
        }

    def test_it_keeps_a_list_of_alternatives_and_the_retry_delays(self, story: Any) -> None:
        doc = story_document()
        kept = {"alternative_actor": ["judge", "writer"], "delay_seconds": 1, "backoff_factor": 2}
        doc["steps"][0]["branches"][0].update(
            action="RETRY_WITH_DIFFERENT_ACTOR", params={**kept, "max_retries": 3}
        )
        initial = BranchForm.initial_from(doc["steps"][0]["branches"][0])
        assert (initial["alternative_actor"], initial["other_params"]) == ("", kept)
        data = branch_data(doc, 0, 0, other_params=json.dumps(initial["other_params"]))
        data["alternative_actor"] = ""
        panel = BranchPanel(context=DocumentContext(doc), step_index=0, branch_index=0, data=data)
        assert panel.is_valid(), panel.form.errors
        assert panel.result["params"] == {**kept, "max_retries": 3}

    def test_it_marks_a_branch_inactive(self, story: Any) -> None:
        doc = story_document()
        data = branch_data(doc, 0, 1)
        del data["active"]
        panel = BranchPanel(context=DocumentContext(doc), step_index=0, branch_index=1, data=data)
        assert panel.is_valid(), panel.form.errors
        assert panel.result["active"] is False

    def test_an_untouched_branch_comes_back_unchanged(self, story: Any) -> None:
        doc = story_document()
        for j, branch in enumerate(doc["steps"][0]["branches"]):
            panel = BranchPanel(
                context=DocumentContext(doc),
                step_index=0,
                branch_index=j,
                data=branch_data(doc, 0, j),
            )
            assert panel.is_valid(), (j, panel.form.errors)
            assert panel.result == branch


class TestRecipeSettings:
    def formset_data(self, doc: dict[str, Any], **changes: Any) -> QueryDict:
        data = QueryDict(mutable=True)
        data.update({"recipe-name": doc["name"], "recipe-description": doc["description"]})
        inputs = list(doc["inputs"].items())
        data.update(
            {"inputs-TOTAL_FORMS": str(len(inputs) + 1), "inputs-INITIAL_FORMS": str(len(inputs))}
        )
        for i, (name, spec) in enumerate(inputs):
            data.update({f"inputs-{i}-name": name, f"inputs-{i}-type": spec["type"]})
            if spec.get("required"):
                data[f"inputs-{i}-required"] = "on"
        actors = list(doc["actors"].items())
        data.update(
            {"actors-TOTAL_FORMS": str(len(actors) + 1), "actors-INITIAL_FORMS": str(len(actors))}
        )
        for i, (alias, reference) in enumerate(actors):
            data.update({f"actors-{i}-alias": alias, f"actors-{i}-reference": reference})
        data.update(changes)
        return data

    def test_it_returns_name_inputs_and_actors(self, story: Any) -> None:
        doc = story_document()
        settings = RecipeSettings(
            doc,
            self.formset_data(
                doc,
                **{"inputs-1-name": "tone", "inputs-1-type": "string", "inputs-1-default": "warm"},
            ),
        )
        assert settings.is_valid()
        assert settings.result["inputs"] == {
            "topic": {"type": "string", "required": True},
            "tone": {"type": "string", "default": "warm"},
        }
        assert settings.result["actors"] == doc["actors"]

    def test_it_refuses_an_alias_without_an_actor_and_a_bad_default(self, story: Any) -> None:
        doc = story_document()
        settings = RecipeSettings(
            doc,
            self.formset_data(
                doc,
                **{
                    "actors-3-alias": "critic",
                    "inputs-1-name": "n",
                    "inputs-1-type": "number",
                    "inputs-1-default": "many",
                },
            ),
        )
        assert not settings.is_valid()
        assert settings.actors.forms[3].errors["reference"]
        assert settings.inputs.forms[1].errors["default"]

    def test_it_refuses_removing_an_alias_steps_use(self, story: Any) -> None:
        doc = story_document()
        settings = RecipeSettings(doc, self.formset_data(doc, **{"actors-0-DELETE": "on"}))
        assert not settings.is_valid()
        assert any("unknown actor alias 'writer'" in e for e in settings.form.non_field_errors())


def test_scripted_answers_are_separated_by_dashes() -> None:
    assert split_answers("first\r\nline two\n---\nsecond\n  ---  \n\n") == [
        "first\nline two",
        "second",
    ]
    assert split_answers("   ") == []


def test_a_recipe_without_steps_opens_its_settings(story: Any) -> None:
    doc = copy.deepcopy(story_document(steps=[]))
    assert RecipeSettings(doc).form.initial["name"] == "Story with review"


def test_the_import_form_refuses_a_file_over_the_size_limit_before_reading_it(
    settings: Any,
) -> None:
    settings.RECIPE_MAX_BYTES = 10
    form = ImportForm(files={"file": SimpleUploadedFile("r.json", b"{" + b" " * 20 + b"}")})

    assert not form.is_valid()
    assert form.errors["file"] == ["The file is 22 bytes; the limit is 10."]
