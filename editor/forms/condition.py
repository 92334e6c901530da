"""The condition builder's form: one node of a branch's condition, built from the catalog.

A node's fields are its condition type's, as the engine's catalog describes them (label,
kind, choices, help, required); the type and operator menus list the catalog's types,
combinators and operators. Whether a value means what its type needs is checked by the
engine when the branch is applied (`BranchPanel`), and shown beside the field.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from workflows.engine import CONDITION_KEYS, value_text
from workflows.validators import json_value_errors, whole_number

from ..catalog import catalog, condition_type, logical_types, operator_names
from .actors import ActorPicker
from .document import DocumentContext
from .fields import normalise_newlines


def type_choices() -> list[tuple[str, str]]:
    """Return the condition menu: each type, each alias (to keep its spelling), combinators."""
    choices: list[tuple[str, str]] = []
    for spec in catalog()["conditions"]:
        choices.append((spec["type"], spec["label"]))
        choices += [(alias, f"{spec['label']} ({alias})") for alias in spec["aliases"]]
    return choices + [(name, name) for name in logical_types()]


def is_flag(field: dict[str, Any], operator: str) -> bool:
    """Tell whether a field takes true or false (with this operator).

    A text field whose default is true or false holds a flag with `equals` and a text with
    other operators (`execution_error`: failed or not, or the text its error contains).
    """
    return field["kind"] == "boolean" or (
        isinstance(field["default"], bool) and operator == "equals"
    )


def is_multiple(field: dict[str, Any]) -> bool:
    """Tell whether a text field is a set of letters from its choices (a regex's flags)."""
    return field["kind"] == "text" and bool(field["choices"])


def _number(text: str) -> int | float | None:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


# The condition type whose value is an option of the human step the branch leaves.
REVIEWER_CHOICE = ("human_decision", "value")


def _option_field(options: tuple[str, ...], current: str, common: dict[str, Any]) -> forms.Field:
    """Return the menu of a human step's options; a value it does not list (several options,
    `approve|revise`, or one the step no longer has) stays in it as written."""
    choices = [(o, o) for o in options]
    if current and current not in options:
        choices.append((current, current))
    blank = [("", "— pick an option")]
    return forms.ChoiceField(
        choices=blank + choices, **{**common, "help_text": "The reviewer's choice."}
    )


def _form_field(
    field: dict[str, Any],
    operator: str,
    context: DocumentContext,
    kind: str,
    current: str,
    picker: ActorPicker,
) -> forms.Field:
    """Return the form field that edits a catalog field, by its kind."""
    common: dict[str, Any] = {
        "label": field["label"],
        "help_text": field["help"],
        "required": field["required"],
    }
    if (kind, field["name"]) == REVIEWER_CHOICE and context.step_options:
        return _option_field(context.step_options, current, common)
    if is_flag(field, operator):
        return forms.ChoiceField(choices=[("true", "true"), ("false", "false")], **common)
    if is_multiple(field):
        return forms.MultipleChoiceField(
            choices=[(c, c) for c in field["choices"]],
            widget=forms.CheckboxSelectMultiple,
            **common,
        )
    if field["kind"] == "choice":
        blank = [] if field["required"] else [("", f"— {field['default'] or ''}".rstrip())]
        return forms.ChoiceField(choices=blank + [(c, c) for c in field["choices"]], **common)
    if field["kind"] == "actor":
        return forms.ChoiceField(choices=picker.choices("—", current), **common)
    if field["kind"] == "step":
        return forms.ChoiceField(
            choices=[("", "—")] + [(k, k) for k in context.step_keys], **common
        )
    widget = forms.Textarea(attrs={"rows": 2}) if field["kind"] == "template" else None
    return forms.CharField(strip=False, widget=widget, **common)


class ConditionForm(forms.Form):
    """One node of a condition tree; and/or/not nodes hold `count` children."""

    type = forms.ChoiceField(choices=(), label="Condition")
    prev_type = forms.CharField(required=False, widget=forms.HiddenInput)
    operator = forms.ChoiceField(choices=(), required=False)
    extra = forms.CharField(required=False, widget=forms.HiddenInput)
    count = forms.IntegerField(required=False, widget=forms.HiddenInput, min_value=0)

    def __init__(
        self,
        *args: Any,
        context: DocumentContext,
        picker: ActorPicker | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # An actor field (an evaluator) offers every actor, as the branch's other pickers do,
        # and shares their picker: an actor picked with no alias gets one, once.
        self.picker = picker or ActorPicker(context)
        self.kind = self._posted("type") or "default"
        self.spec = condition_type(self.kind)
        self.fields["type"].choices = type_choices()
        # A new type shows other fields.
        self.fields["type"].widget.attrs["data-refresh"] = "true"
        operators = operator_names(self.spec) if self.spec else []
        labels = {op["name"]: op["label"] for op in self.spec["operators"]} if self.spec else {}
        if self.spec:
            labels.update(
                (alias, f"{labels[name]} ({alias})")
                for alias, name in self.spec["operator_aliases"].items()
            )
        blank = [("", "—")] if len(self.spec["operators"] if self.spec else ()) <= 1 else []
        self.fields["operator"].choices = blank + [(o, labels[o]) for o in operators]
        operator = self._posted("operator")
        for field in self.spec["fields"] if self.spec else []:
            current = self._posted(field["name"])
            self.fields[field["name"]] = _form_field(
                field, operator, context, self.kind, current, self.picker
            )
            if isinstance(field["default"], bool) and field["kind"] != "boolean":
                # The operator decides what the field holds: a new one shows it anew.
                self.fields["operator"].widget.attrs["data-refresh"] = "true"

    def _posted(self, name: str) -> str:
        if self.is_bound:
            return str(self.data.get(self.add_prefix(name)) or "")
        return str(self.initial.get(name) or "")

    @property
    def is_logical(self) -> bool:
        return self.kind in logical_types()

    @property
    def condition_fields(self) -> list[forms.BoundField]:
        """Return the fields of the node's condition type, in the catalog's order."""
        return [self[f["name"]] for f in self.spec["fields"]] if self.spec else []

    def clean_extra(self) -> str:
        """Keep the condition's other fields (JSON the page carries) only if they can be stored."""
        raw = self.cleaned_data["extra"]
        try:
            loaded = json.loads(raw) if raw else None
        except (ValueError, RecursionError):
            return raw  # unreadable: `condition` leaves it out
        if errors := json_value_errors(loaded):
            raise ValidationError(errors[0])
        return raw

    def _extra(self) -> dict[str, Any]:
        data = self.cleaned_data
        if not data.get("extra") or data.get("prev_type") != data["type"]:
            return {}
        try:
            loaded = json.loads(data["extra"])
        except (ValueError, RecursionError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def condition(self, children: list[dict[str, Any]]) -> dict[str, Any]:
        """Return the condition document of this node (cleaned data), given its children's."""
        data = self.cleaned_data
        extra = self._extra()
        if self.is_logical:
            return {"type": data["type"], **extra, "conditions": children}
        cond: dict[str, Any] = {"type": data["type"]}
        operator = data.get("operator") or ""
        if operator:
            cond["operator"] = operator
        for field in self.spec["fields"] if self.spec else []:
            value = _document_value(field, operator, data.get(field["name"]))
            if field["kind"] == "actor" and isinstance(value, str):
                value = self.picker.resolve(value)
            if value is not None or field["required"]:
                cond[field["name"]] = "" if value is None else value
        for key, value in extra.items():
            cond.setdefault(key, value)
        return cond


def _document_value(field: dict[str, Any], operator: str, posted: Any) -> Any:
    """Return what the document holds for a field as posted; None to leave it out."""
    if is_multiple(field):
        return "".join(sorted(posted)) if posted else None
    raw = posted or ""
    if is_flag(field, operator):
        return raw == "true" if raw in ("true", "false") else None
    if not raw:
        return None
    if field["kind"] in ("number", "integer"):
        # Text that is not a number is kept: the engine says what the field takes.
        number = _number(raw)
        return raw if number is None else number
    if field["kind"] == "path":
        return raw.strip()
    return normalise_newlines(raw)


def initial_of(when: dict[str, Any]) -> dict[str, Any]:
    """Return the form initial of a condition that combines none (an unknown type: default)."""
    spec = condition_type(when.get("type"))
    kind = when.get("type") if spec is not None else "default"
    spec = spec or condition_type("default")
    names = {f["name"] for f in spec["fields"]} if spec else set()
    extra = {k: v for k, v in when.items() if k not in CONDITION_KEYS and k not in names}
    initial: dict[str, Any] = {
        "type": kind,
        "prev_type": kind,
        "operator": when.get("operator") or "",
        "extra": json.dumps(extra) if extra else "",
        "count": 0,
    }
    for field in spec["fields"] if spec else []:
        value = when.get(field["name"])
        if is_multiple(field):
            initial[field["name"]] = list(value) if isinstance(value, str) else []
        else:
            initial[field["name"]] = value_text(value)
    return initial


def posted_initial(data: Any, prefix: str, kinds: tuple[str, ...]) -> dict[str, Any]:
    """Return the initial of the node `prefix` as posted, with the fields of the `kinds`."""
    initial: dict[str, Any] = {
        name: str(data.get(f"{prefix}-{name}") or "") for name in ("prev_type", "operator", "extra")
    }
    initial["type"] = str(data.get(f"{prefix}-type") or "default")
    initial["count"] = whole_number(str(data.get(f"{prefix}-count") or "")) or 0
    for kind in kinds:
        spec = condition_type(kind)
        for field in spec["fields"] if spec else []:
            key = f"{prefix}-{field['name']}"
            if is_multiple(field):
                getlist = getattr(data, "getlist", None)
                initial[field["name"]] = getlist(key) if getlist else []
            else:
                initial[field["name"]] = str(data.get(key) or "")
    return initial
