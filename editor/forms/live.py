"""Panels applied as the author types: the valid fields apply, each error stays beside its field.

A form with invalid fields is validated a second time with those fields put back as the
element held them: what else was typed applies, and the invalid fields keep what was typed
in the browser, with their errors, until they are right. The answer names each field by its
posted name, with the one-click fixes that would make it right.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import QueryDict

from ..selectors import undeclared_inputs
from .actors import ActorPicker, new_alias

# What the author calls each actor picker, in its fix ("Add judge alias for demo-judge").
PICKER_ROLES = {
    "actor": "actor",
    "judge": "judge",
    "evaluator": "judge",
    "escalate_to": "reviewer",
    "alternative_actor": "retry actor",
}
# The posted fields of the fixes taken: a text input the prompt names, an alias for an actor
# a field names (one field per fix).
ADD_INPUT = "add_input"
ADD_ALIAS = "add_alias"


@dataclass
class Fix:
    """A one-click fix: sets the posted field `name` to `value` (or adds it, hidden)."""

    label: str
    name: str
    value: str


@dataclass
class LiveAnswer:
    """What a live apply answers: the result (None: nothing applied) and what is not right."""

    result: dict[str, Any] | None
    errors: dict[str, list[str]] = field(default_factory=dict)
    form_errors: list[str] = field(default_factory=list)
    fixes: dict[str, list[Fix]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what the form changed of what was typed

    def as_data(self) -> dict[str, Any]:
        return {
            "result": self.result,
            "notes": self.notes,
            "errors": self.errors,
            "form_errors": self.form_errors,
            "fixes": {
                name: [{"label": f.label, "name": f.name, "value": f.value} for f in fixes]
                for name, fixes in self.fixes.items()
            },
        }


def reverted(posted: Iterable[forms.Form], unbound: Iterable[forms.Form]) -> QueryDict | None:
    """Return the data of the `posted` forms with their invalid fields as the `unbound` forms
    show them (matched by posted name), or None if there is none to put back or one of them
    has no field to take its value from (a row or a condition node not in the element)."""
    held = {bound.html_name: bound for form in unbound for bound in form}
    data: QueryDict | None = None
    for form in posted:
        for name in form.errors:
            if name == NON_FIELD_ERRORS or name not in form.fields:
                continue
            bound = held.get(form.add_prefix(name))
            if bound is None:
                return None
            data = data if data is not None else form.data.copy()
            put_back(data, bound)
    return data


def put_back(data: QueryDict, bound: forms.BoundField) -> None:
    """Set `bound`'s posted name in `data` to the value it shows, as a browser posts it."""
    value = bound.value()
    if isinstance(bound.field, forms.BooleanField):
        if value:
            data[bound.html_name] = "on"
        else:
            data.pop(bound.html_name, None)
    elif isinstance(value, (list, tuple)):
        data.setlist(bound.html_name, [str(v) for v in value])
    else:
        data[bound.html_name] = "" if value is None else str(value)


def field_errors(all_forms: Iterable[forms.Form]) -> tuple[dict[str, list[str]], list[str]]:
    """Return the field errors by posted name, and the errors of no field, said once."""
    errors: dict[str, list[str]] = {}
    general: list[str] = []
    for form in all_forms:
        for name, messages in form.errors.items():
            if name == NON_FIELD_ERRORS:
                general += messages
            else:
                errors.setdefault(form.add_prefix(name), []).extend(messages)
    beside = [m for messages in errors.values() for m in messages]
    # A message of no field that repeats one shown beside its field ("where: message").
    once = [m for m in dict.fromkeys(general) if not any(m.endswith(b) for b in beside)]
    return errors, once


def alias_fixes(all_forms: Iterable[forms.Form], picker: ActorPicker) -> dict[str, list[Fix]]:
    """Offer an alias for each actor an invalid field names that has none in the recipe (a
    judge, an evaluator, a step's actor): the alias is named as the field names the actor."""
    fixes: dict[str, list[Fix]] = {}
    actors = picker.context.actors
    for form in all_forms:
        for name in form.errors:
            if name not in form.fields:
                continue
            value = form[name].value()
            if not isinstance(value, str) or value in actors or not picker.is_reference(value):
                continue
            if new_alias(value, set(actors)) != value:
                continue  # no alias can be called so: the picker adds one under another name
            role = PICKER_ROLES.get(name) or str(form.fields[name].label or name).lower()
            fix = Fix(f"Add {role} alias for {value}", ADD_ALIAS, value)
            fixes[form.add_prefix(name)] = [fix]
    return fixes


def declared_aliases(document: dict[str, Any], references: list[str]) -> dict[str, str]:
    """Declare in `document` an alias named after each actor of `references` (a fix taken);
    return those declared."""
    actors = document.get("actors")
    if not isinstance(actors, dict):
        actors = document["actors"] = {}
    added = {}
    for reference in references:
        if reference not in actors and new_alias(reference, set(actors)) == reference:
            actors[reference] = added[reference] = reference
    return added


def prompt_fixes(form: forms.Form, document: dict[str, Any]) -> dict[str, list[Fix]]:
    """Offer to declare each input an invalid prompt names that the recipe lacks."""
    if "prompt" not in form.errors:
        return {}
    names = undeclared_inputs(document, str(form["prompt"].value() or ""))
    fixes = [Fix(f"Add `{n}` as an input", ADD_INPUT, n) for n in names if n.isidentifier()]
    return {form.add_prefix("prompt"): fixes} if fixes else {}


def declared_inputs(document: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Declare in `document` the text inputs `names` it lacks; return those declared."""
    inputs = document.get("inputs")
    if not isinstance(inputs, dict):
        inputs = document["inputs"] = {}
    added = {}
    for name in names:
        if name.isidentifier() and name not in inputs:
            inputs[name] = added[name] = {"type": "string"}
    return added


def live_apply(
    make_form: Callable[[QueryDict | None], Any],
    valid: Callable[[Any], bool],
    forms_of: Callable[[Any], list[forms.Form]],
    data: QueryDict,
) -> tuple[Any, Any]:
    """Validate what was posted; if it is not right, validate again with the invalid fields
    of all its `forms_of` (sub-forms included) put back. Return (the form as posted, the one
    that applies, or None)."""
    first = make_form(data)
    if valid(first):
        return first, first
    data_back = reverted(forms_of(first), forms_of(make_form(None)))
    if data_back is None:
        return first, None
    second = make_form(data_back)
    return first, second if valid(second) else None
