"""The editor's side-panel forms: recipe settings, step, branch (with its condition builder).

The forms edit the document the page holds (recipe format v1): each one is bound to the posted
form fields plus the current document, and on success returns the new piece of the document.
Meaning is checked by the same code that checks a save (`check_document`), and its
`path: message` errors are shown beside the field they name.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.text import slugify

from workflows.engine.vocabulary import (
    ACTIONS,
    CONDITION_OPERATORS,
    CONDITION_TYPE_ALIASES,
    CONTENT_TYPES,
    INPUT_TYPES,
    LOGICAL_TYPES,
    NUMERIC_OPERATOR_ALIASES,
    NUMERIC_TYPES,
    REPEAT_ACTIONS,
    STEP_KINDS,
)
from workflows.models import SLUG_VALIDATOR, Recipe
from workflows.validators import HUMAN_PREFIX, RESERVED_SLUGS, json_value_errors, whole_number

from .conditions import canonical_action, logical_type
from .selectors import actor_choices, document_errors, human_references

STEP_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_CONDITION_DEPTH = 8

KIND_LABELS = {
    "llm": "LLM",
    "human": "Human review",
    "decision_tree": "Decision tree",
    "classify": "Classify",
}
CONDITION_TYPE_LABELS = {
    "length_check": "Length of the response",
    "pattern_match": "Text / regex match",
    "ai_evaluation": "Judge score (AI evaluation)",
    "human_decision": "Reviewer decision",
    "execution_timeout": "Step timed out",
    "execution_error": "Step failed",
    "field_compare": "Compare a field",
    "check_count": "Compare a count (check_count)",
    "content_type": "Content type",
    "route_selected": "Route selected (classify)",
    "and": "All of (and)",
    "or": "Any of (or)",
    "not": "Not",
    "default": "Default (always)",
}
OPERATOR_LABELS = {
    "less_than": "<",
    "less_equal": "≤",
    "greater_than": ">",
    "greater_equal": "≥",
    "equals": "=",
    "not_equals": "≠",
    "greater_than_or_equal": "≥ (greater_than_or_equal)",
    "less_than_or_equal": "≤ (less_than_or_equal)",
    "regex_match": "matches regex",
    "regex_not_match": "does not match regex",
    "contains": "contains",
    "not_contains": "does not contain",
    "user_choice": "reviewer chose",
    "is": "is",
    "is_not": "is not",
    "includes": "includes",
    "always": "always",
}
# The condition fields the builder manages; any other key of a condition is kept as it was.
MANAGED_CONDITION_KEYS = frozenset(
    {"type", "operator", "value", "conditions", "flags", "unit", "evaluator", "prompt", "field"}
)


def _document_path(path: str) -> list[str]:
    """Split `steps[1].branches[0].when.value` into `['steps', '1', 'branches', '0', ...]`."""
    return [p for p in re.split(r"[.\[\]]+", path) if p]


def _errors_under(errors: list[str], prefix: str) -> list[tuple[list[str], str]]:
    """Return (remaining path parts, message) of the errors at or below the path `prefix`."""
    base = _document_path(prefix)
    found = []
    for error in errors:
        path, _, message = error.partition(": ")
        parts = _document_path(path)
        if parts[: len(base)] == base:
            found.append((parts[len(base) :], message))
    return found


class StorableJSONField(forms.JSONField):
    """A JSON field that refuses what the database cannot hold, saying where in the value.

    The door (config/middleware.py) refuses NUL in the text posted, but JSON can still write
    one (`\\u0000`) or a lone surrogate (`\\ud800`), and NaN, which no jsonb column takes.
    """

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except (ValueError, RecursionError):  # a 5000-digit number, nesting too deep
            raise ValidationError(
                self.error_messages["invalid"], code="invalid", params={"value": value}
            ) from None

    def validate(self, value: Any) -> None:
        super().validate(value)
        if errors := json_value_errors(value):
            raise ValidationError(errors[0])

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            value = super().bound_data(data, initial)
        except (ValueError, RecursionError):
            return forms.fields.InvalidJSONInput(data)
        if isinstance(data, str) and json_value_errors(value):
            # Show the refused text as it was typed: written back out, a lone surrogate
            # cannot be encoded into the page.
            return forms.fields.InvalidJSONInput(data)
        return value


class PrettyJSONField(StorableJSONField):
    """A JSON field shown indented, for the few settings that are whole JSON structures."""

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        if value is None or value == "":
            return ""
        return json.dumps(value, ensure_ascii=False, indent=2)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _normalise_newlines(value: str) -> str:
    return value.replace("\r\n", "\n").replace("\r", "\n")


@dataclass
class DocumentContext:
    """The document a panel edits, with what its forms offer as choices."""

    document: dict[str, Any]

    @property
    def steps(self) -> list[dict[str, Any]]:
        steps = self.document.get("steps")
        return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []

    @property
    def actors(self) -> dict[str, str]:
        actors = self.document.get("actors")
        return {str(k): str(v) for k, v in actors.items()} if isinstance(actors, dict) else {}

    @property
    def step_keys(self) -> list[str]:
        return [s["key"] for s in self.steps if isinstance(s.get("key"), str)]

    def alias_choices(self, blank: str = "—") -> list[tuple[str, str]]:
        return [("", blank)] + [(a, f"{a} → {ref}") for a, ref in self.actors.items()]


# -- recipe settings -------------------------------------------------------------------------


class NewRecipeForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.CharField(
        max_length=100,
        required=False,
        validators=[SLUG_VALIDATOR],
        help_text="Used in URLs and the API. Leave empty to derive it from the name.",
    )
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        slug = data.get("slug") or slugify(data.get("name", ""))[:100]
        if not slug:
            self.add_error("slug", "Choose a slug: letters, digits, '-' or '_'.")
        elif slug in RESERVED_SLUGS:
            self.add_error("slug", f"'{slug}' is reserved; choose another slug.")
        elif Recipe.objects.filter(slug=slug).exists():
            self.add_error("slug", f"A recipe '{slug}' exists already; choose another slug.")
        data["slug"] = slug
        return data


class ImportForm(forms.Form):
    file = forms.FileField(help_text="A recipe file in format v1, JSON or YAML.")

    def clean_file(self) -> Any:
        upload = self.cleaned_data["file"]
        if upload.size > settings.RECIPE_MAX_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size} bytes; the limit is {settings.RECIPE_MAX_BYTES}."
            )
        return upload


class RecipeForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, strip=False
    )


class InputForm(forms.Form):
    name = forms.CharField(max_length=100, required=False)
    type = forms.ChoiceField(
        choices=[(t, t) for t in INPUT_TYPES], initial="string", required=False
    )
    required = forms.BooleanField(required=False)
    default = forms.CharField(
        required=False, help_text="JSON for numbers, booleans, objects and arrays."
    )
    description = forms.CharField(required=False)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if name and not INPUT_NAME.match(name):
            raise ValidationError("Use letters, digits and _ (not starting with a digit).")
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        data["type"] = data.get("type") or "string"
        raw = data.get("default", "")
        if raw in ("", None):
            data["default"] = None
            return data
        if data.get("type") == "string":
            data["default"] = raw
            return data
        try:
            data["default"] = json.loads(raw)
        except (ValueError, RecursionError):
            self.add_error("default", f"Write the default as JSON for a {data.get('type')}.")
            return data
        if errors := json_value_errors(data["default"]):
            self.add_error("default", errors[0])
        return data


class ActorAliasForm(forms.Form):
    alias = forms.CharField(max_length=100, required=False)
    reference = forms.ChoiceField(choices=(), required=False, label="Actor")

    def __init__(self, *args: Any, references: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["reference"].choices = [("", "—"), *references]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        alias, reference = data.get("alias", "").strip(), data.get("reference")
        data["alias"] = alias
        if alias and not ALIAS.match(alias):
            self.add_error("alias", "Use letters, digits, '-' and '_'.")
        if alias and not reference:
            self.add_error("reference", "Choose the actor this alias names.")
        if reference and not alias:
            self.add_error("alias", "Name the alias steps use for this actor.")
        return data


InputFormSet = forms.formset_factory(InputForm, extra=1, can_delete=True)
ActorFormSet = forms.formset_factory(ActorAliasForm, extra=1, can_delete=True)


def _input_initial(name: str, spec: Any) -> dict[str, Any]:
    spec = spec if isinstance(spec, dict) else {}
    default = spec.get("default")
    return {
        "name": name,
        "type": spec.get("type") if spec.get("type") in INPUT_TYPES else "string",
        "required": spec.get("required") is True,
        "default": ""
        if default is None
        else default
        if isinstance(default, str)
        else json.dumps(default),
        "description": _text(spec.get("description")),
    }


def _reference_choices(current: list[str]) -> list[tuple[str, str]]:
    choices = [(c.reference, c.label) for c in actor_choices()]
    known = {c[0] for c in choices}
    choices += [(r, f"{r} (unknown)") for r in current if r and r not in known]
    return choices


@dataclass
class RecipeSettings:
    """The recipe-level form: name, description, inputs and actor aliases."""

    document: dict[str, Any]
    data: Any = None
    form: RecipeForm = field(init=False)
    inputs: Any = field(init=False)
    actors: Any = field(init=False)
    result: dict[str, Any] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        doc = self.document
        inputs = doc.get("inputs") if isinstance(doc.get("inputs"), dict) else {}
        actors = doc.get("actors") if isinstance(doc.get("actors"), dict) else {}
        self.form = RecipeForm(
            self.data,
            prefix="recipe",
            initial={"name": _text(doc.get("name")), "description": _text(doc.get("description"))},
        )
        self.inputs = InputFormSet(
            self.data,
            prefix="inputs",
            initial=[_input_initial(str(name), spec) for name, spec in inputs.items()],
        )
        references = [r for r in actors.values() if isinstance(r, str)]
        self.actors = ActorFormSet(
            self.data,
            prefix="actors",
            initial=[
                {"alias": str(a), "reference": r} for a, r in actors.items() if isinstance(r, str)
            ],
            form_kwargs={"references": _reference_choices(references)},
        )

    def is_valid(self) -> bool:
        valid = self.form.is_valid() & self.inputs.is_valid() & self.actors.is_valid()
        if not valid:
            return False
        inputs: dict[str, Any] = {}
        for form in self.inputs.forms:
            data = form.cleaned_data
            if not data or data.get("DELETE") or not data.get("name"):
                continue
            if data["name"] in inputs:
                form.add_error("name", f"The input '{data['name']}' is declared twice.")
                return False
            spec: dict[str, Any] = {"type": data["type"]}
            if data.get("required"):
                spec["required"] = True
            if data.get("default") is not None:
                spec["default"] = data["default"]
            if data.get("description"):
                spec["description"] = data["description"]
            inputs[data["name"]] = spec
        actors: dict[str, str] = {}
        for form in self.actors.forms:
            data = form.cleaned_data
            if not data or data.get("DELETE") or not data.get("alias"):
                continue
            if data["alias"] in actors:
                form.add_error("alias", f"The alias '{data['alias']}' is declared twice.")
                return False
            actors[data["alias"]] = data["reference"]
        self.result = {
            "name": self.form.cleaned_data["name"],
            "description": _normalise_newlines(self.form.cleaned_data["description"]),
            "inputs": inputs,
            "actors": actors,
        }
        candidate = {**self.document, **self.result}
        before = set(document_errors(self.document))
        # Only the errors this change causes block it (e.g. removing an alias steps use).
        caused = [e for e in document_errors(candidate) if e not in before]
        for error in caused:
            path, _, message = error.partition(": ")
            if path == "name":
                self.form.add_error("name", message)
            else:
                self.form.add_error(None, error)
        return not caused


# -- steps -----------------------------------------------------------------------------------


def _new_alias(reference: str, taken: set[str]) -> str:
    base = reference.removeprefix(HUMAN_PREFIX).split(":")[0]
    base = re.sub(r"[^A-Za-z0-9_-]+", "_", base).strip("_-") or "actor"
    if not base[0].isalpha() and base[0] != "_":
        base = f"a_{base}"
    alias, n = base, 2
    while alias in taken:
        alias, n = f"{base}_{n}", n + 1
    return alias


class StepForm(forms.Form):
    key = forms.CharField(
        max_length=100, help_text="Stable id of the step: letters, digits, '-' and '_'."
    )
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=[(k, KIND_LABELS[k]) for k in STEP_KINDS])
    sequence = forms.IntegerField(
        min_value=1, help_text="Position in the sequence: used when no branch matches."
    )
    actor = forms.ChoiceField(choices=(), required=False)
    prompt = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 7, "spellcheck": "false"}), required=False, strip=False
    )
    timeout_s = forms.IntegerField(min_value=1, required=False, label="Timeout (seconds)")
    validation_enabled = forms.BooleanField(required=False, label="Validate the response")
    threshold = forms.FloatField(min_value=0, max_value=1, required=False, initial=0.75)
    max_attempts = forms.IntegerField(min_value=1, max_value=20, required=False, initial=5)
    judge = forms.ChoiceField(choices=(), required=False)
    fallback = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, strip=False
    )
    options = forms.CharField(
        required=False,
        help_text="Reviewer options, comma separated (default: approve, reject, revise).",
    )
    tree = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 8}))
    leaf_targets = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    routes = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 8}))
    bypass = forms.BooleanField(required=False, label="Select every route (bypass)")
    max_reclassify = forms.IntegerField(min_value=0, max_value=10, required=False)

    FIELD_PATHS = {
        "key": "key",
        "name": "name",
        "kind": "kind",
        "actor": "actor",
        "prompt": "prompt",
        "timeout_s": "timeout_s",
        "validation": "threshold",
        "options": "options",
        "tree": "tree",
        "leaf_targets": "leaf_targets",
        "routes": "routes",
        "bypass": "bypass",
        "max_reclassify": "max_reclassify",
    }
    VALIDATION_PATHS = {
        "threshold": "threshold",
        "max_attempts": "max_attempts",
        "judge": "judge",
        "fallback": "fallback",
    }

    def __init__(self, *args: Any, context: DocumentContext, index: int, **kwargs: Any) -> None:
        self.context = context
        self.index = index
        self.original = copy.deepcopy(context.steps[index])
        if not args or args[0] is None:
            kwargs.setdefault(
                "initial", {**self.initial_from(self.original), "sequence": index + 1}
            )
        super().__init__(*args, **kwargs)
        self.fields["sequence"] = forms.IntegerField(
            min_value=1,
            max_value=len(context.steps),
            help_text=self.fields["sequence"].help_text,
        )
        aliases = context.actors
        humans = human_references(list(aliases.values()))
        actor_options: list[tuple[str, Any]] = [("", "—")]
        actor_options.append(
            (
                "Aliases of this recipe",
                [
                    (a, f"{a} → {ref}{' (reviewers)' if ref in humans else ''}")
                    for a, ref in aliases.items()
                ],
            )
        )
        named = set(aliases.values())
        others = [(f"+{c.reference}", c.label) for c in actor_choices() if c.reference not in named]
        if others:
            actor_options.append(("Add an alias for", others))
        self.fields["actor"].choices = actor_options
        self.fields["judge"].choices = context.alias_choices("— no judge")
        self.result: dict[str, Any] | None = None
        self.actors_added: dict[str, str] = {}

    @staticmethod
    def initial_from(step: dict[str, Any]) -> dict[str, Any]:
        validation = step.get("validation") if isinstance(step.get("validation"), dict) else None
        options = step.get("options")
        return {
            "key": step.get("key", ""),
            "name": step.get("name", ""),
            "kind": step.get("kind", "llm"),
            "actor": step.get("actor") or "",
            "prompt": step.get("prompt", ""),
            "timeout_s": step.get("timeout_s"),
            "validation_enabled": validation is not None,
            "threshold": (validation or {}).get("threshold", 0.75),
            "max_attempts": (validation or {}).get("max_attempts", 5),
            "judge": (validation or {}).get("judge") or "",
            "fallback": (validation or {}).get("fallback", ""),
            "options": ", ".join(options) if isinstance(options, list) else "",
            "tree": step.get("tree"),
            "leaf_targets": step.get("leaf_targets"),
            "routes": step.get("routes"),
            "bypass": bool(step.get("bypass")),
            "max_reclassify": step.get("max_reclassify"),
        }

    def clean_key(self) -> str:
        key = self.cleaned_data["key"].strip()
        if not STEP_KEY.match(key):
            raise ValidationError(
                "Use letters, digits, '-' and '_' (starting with a letter or digit)."
            )
        others = [k for i, k in enumerate(self.context.step_keys) if i != self.index]
        if key in others:
            raise ValidationError(f"Another step is called '{key}'.")
        return key

    def clean_prompt(self) -> str:
        return _normalise_newlines(self.cleaned_data["prompt"])

    def clean_fallback(self) -> str:
        return _normalise_newlines(self.cleaned_data["fallback"])

    def clean_options(self) -> list[str] | None:
        raw = self.cleaned_data["options"]
        options = [o.strip() for o in raw.split(",") if o.strip()]
        return options or None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        for name, wanted, label in (
            ("tree", dict, "an object"),
            ("leaf_targets", dict, "an object of leaf name: step key"),
            ("routes", list, "a list of routes"),
        ):
            value = data.get(name)
            if value is not None and not isinstance(value, wanted):
                self.add_error(name, f"Write {label}.")
        if self.errors:
            return data
        step = self._build_step(data)
        candidate = copy.deepcopy(self.context.document)
        steps = candidate["steps"]
        old_key = self.original.get("key")
        if step["key"] != old_key:
            for other in steps:
                for branch in (
                    other.get("branches") if isinstance(other.get("branches"), list) else []
                ):
                    if isinstance(branch, dict) and branch.get("target") == old_key:
                        branch["target"] = step["key"]
        steps[self.index] = {**step, "branches": self.original.get("branches", [])}
        if "position" in self.original:
            steps[self.index]["position"] = self.original["position"]
        new_index = data["sequence"] - 1
        steps.insert(new_index, steps.pop(self.index))
        candidate["actors"] = {**self.context.actors, **self.actors_added}
        errors = document_errors(candidate)
        for parts, message in _errors_under(errors, f"steps[{new_index}]"):
            if parts[:1] == ["branches"] or parts[:1] == ["position"]:
                continue
            head = parts[0] if parts else ""
            if head == "validation" and len(parts) > 1:
                target = self.VALIDATION_PATHS.get(parts[1])
            else:
                target = self.FIELD_PATHS.get(head)
            detail = ".".join(parts[1:]) if head in ("tree", "routes", "leaf_targets") else ""
            self.add_error(target, f"{detail}: {message}" if detail else message)
        if not self.errors:
            self.result = step
        return data

    def _build_step(self, data: dict[str, Any]) -> dict[str, Any]:
        original = self.original
        step: dict[str, Any] = {
            k: v
            for k, v in original.items()
            if k not in ("branches", "position", *self.FIELD_PATHS, "validation")
        }
        step.update({"key": data["key"], "name": data["name"], "kind": data["kind"]})
        actor = data.get("actor") or ""
        if actor.startswith("+"):
            reference = actor[1:]
            aliases = set(self.context.actors) | set(self.actors_added)
            alias = _new_alias(reference, aliases)
            self.actors_added[alias] = reference
            actor = alias
        if actor:
            step["actor"] = actor
        step["prompt"] = data["prompt"]
        if data.get("timeout_s") is not None:
            step["timeout_s"] = data["timeout_s"]
        if data.get("validation_enabled"):
            validation: dict[str, Any] = {
                "threshold": data["threshold"] if data.get("threshold") is not None else 0.75,
                "max_attempts": data["max_attempts"] if data.get("max_attempts") else 5,
            }
            if data.get("judge"):
                validation["judge"] = data["judge"]
            old = original.get("validation") if isinstance(original.get("validation"), dict) else {}
            if data.get("fallback") or "fallback" in old:
                validation["fallback"] = data["fallback"]
            step["validation"] = validation
        kind = data["kind"]
        if kind == "human" and data.get("options"):
            step["options"] = data["options"]
        if kind == "decision_tree":
            if data.get("tree") is not None:
                step["tree"] = data["tree"]
            if data.get("leaf_targets"):
                step["leaf_targets"] = data["leaf_targets"]
        if kind == "classify":
            if data.get("routes") is not None:
                step["routes"] = data["routes"]
            if data.get("bypass") or "bypass" in original:
                step["bypass"] = bool(data.get("bypass"))
            if data.get("max_reclassify") is not None:
                step["max_reclassify"] = data["max_reclassify"]
        return step


# -- conditions ------------------------------------------------------------------------------


def _operators(kind: str) -> list[str]:
    canonical = CONDITION_TYPE_ALIASES.get(kind, kind)
    operators = list(CONDITION_OPERATORS.get(canonical, ()))
    if canonical in NUMERIC_TYPES:
        operators += list(NUMERIC_OPERATOR_ALIASES)
    return operators


def _value_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "|".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


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


class ConditionForm(forms.Form):
    """One node of a condition tree; and/or/not nodes hold `count` children."""

    type = forms.ChoiceField(
        choices=[(k, v) for k, v in CONDITION_TYPE_LABELS.items()], label="Condition"
    )
    prev_type = forms.CharField(required=False, widget=forms.HiddenInput)
    operator = forms.ChoiceField(choices=(), required=False)
    value = forms.CharField(required=False, strip=False)
    flags = forms.MultipleChoiceField(
        choices=[("i", "ignore case"), ("m", "multi-line"), ("s", "dot matches newline")],
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    unit = forms.ChoiceField(
        choices=[("", "characters"), ("chars", "characters (chars)"), ("words", "words")],
        required=False,
    )
    evaluator = forms.ChoiceField(choices=(), required=False, label="Judge")
    prompt = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2}), label="Judge prompt"
    )
    field = forms.CharField(
        required=False, label="Field", help_text="e.g. image_count or data.score"
    )
    extra = forms.CharField(required=False, widget=forms.HiddenInput)
    count = forms.IntegerField(required=False, widget=forms.HiddenInput, min_value=0)

    def __init__(self, *args: Any, context: DocumentContext, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        kind = self._kind()
        self.kind = kind
        operators = _operators(kind)
        blank = [("", "—")] if kind == "default" or len(operators) <= 1 else []
        self.fields["operator"].choices = blank + [
            (o, OPERATOR_LABELS.get(o, o)) for o in operators
        ]
        self.fields["evaluator"].choices = context.alias_choices("— the step's judge or actor")
        self.fields["value"].label = {
            "length_check": "Length",
            "ai_evaluation": "Score",
            "human_decision": "Option",
            "content_type": "Content type",
            "route_selected": "Route",
            "pattern_match": "Pattern or text",
        }.get(CONDITION_TYPE_ALIASES.get(kind, kind), "Value")
        # A new type shows other fields; so does the operator of execution_error alone.
        self.fields["type"].widget.attrs["data-refresh"] = "true"
        if self.canonical == "execution_error":
            self.fields["operator"].widget.attrs["data-refresh"] = "true"

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

    def _kind(self) -> str:
        if self.is_bound:
            return str(self.data.get(self.add_prefix("type")) or "default")
        return str(self.initial.get("type") or "default")

    @property
    def is_logical(self) -> bool:
        return self.kind in LOGICAL_TYPES

    @property
    def canonical(self) -> str:
        return CONDITION_TYPE_ALIASES.get(self.kind, self.kind)

    @property
    def visible(self) -> dict[str, bool]:
        """Tell which fields the template shows for this condition type."""
        kind = self.canonical
        return {
            "operator": kind not in LOGICAL_TYPES,
            "value": kind not in (*LOGICAL_TYPES, "default", "execution_timeout", "content_type")
            and not (kind == "execution_error" and self._operator() == "equals"),
            "value_bool": kind == "execution_timeout"
            or (kind == "execution_error" and self._operator() == "equals"),
            "value_content": kind == "content_type",
            "flags": kind == "pattern_match",
            "unit": kind == "length_check",
            "evaluator": kind == "ai_evaluation",
            "prompt": kind == "ai_evaluation",
            "field": kind == "field_compare",
        }

    def _operator(self) -> str:
        if self.is_bound:
            return str(self.data.get(self.add_prefix("operator")) or "")
        return str(self.initial.get("operator") or "")

    @property
    def content_types(self) -> tuple[str, ...]:
        return CONTENT_TYPES

    @property
    def current_value(self) -> str:
        if self.is_bound:
            return str(self.data.get(self.add_prefix("value")) or "")
        return str(self.initial.get("value") or "")

    def condition(self, children: list[dict[str, Any]]) -> dict[str, Any]:
        """Return the condition document of this node (cleaned data), given its children's."""
        data = self.cleaned_data
        kind = data["type"]
        extra: dict[str, Any] = {}
        if data.get("extra") and data.get("prev_type") == kind:
            try:
                loaded = json.loads(data["extra"])
            except (ValueError, RecursionError):
                loaded = {}
            extra = loaded if isinstance(loaded, dict) else {}
        if kind in LOGICAL_TYPES:
            return {"type": kind, **extra, "conditions": children}
        canonical = CONDITION_TYPE_ALIASES.get(kind, kind)
        cond: dict[str, Any] = {"type": kind}
        if data.get("operator"):
            cond["operator"] = data["operator"]
        raw = data.get("value") or ""
        op = data.get("operator") or ""
        if canonical in NUMERIC_TYPES:
            number = _number(raw)
            if number is None and canonical == "field_compare" and op in ("equals", "not_equals"):
                cond["value"] = raw
            else:
                cond["value"] = number if number is not None else raw
        elif canonical == "execution_timeout" or (
            canonical == "execution_error" and op == "equals"
        ):
            if raw in ("true", "false"):
                cond["value"] = raw == "true"
        elif canonical != "default":
            cond["value"] = raw
        if canonical == "pattern_match" and data.get("flags"):
            cond["flags"] = "".join(sorted(data["flags"]))
        if canonical == "length_check" and data.get("unit"):
            cond["unit"] = data["unit"]
        if canonical == "ai_evaluation":
            if data.get("evaluator"):
                cond["evaluator"] = data["evaluator"]
            if data.get("prompt"):
                cond["prompt"] = _normalise_newlines(data["prompt"])
        if canonical == "field_compare":
            cond["field"] = (data.get("field") or "").strip()
        for key, value in extra.items():
            cond.setdefault(key, value)
        return cond

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        kind = CONDITION_TYPE_ALIASES.get(data["type"], data["type"])
        raw = data.get("value") or ""
        text_allowed = kind == "field_compare" and data.get("operator") in ("equals", "not_equals")
        if kind in NUMERIC_TYPES and _number(raw) is None and not text_allowed:
            self.add_error("value", "Enter a number.")
        if (
            kind in ("pattern_match", "human_decision", "route_selected", "content_type")
            and not raw
        ):
            self.add_error("value", "Enter a value.")
        if kind == "execution_error" and data.get("operator") == "contains" and not raw:
            self.add_error("value", "Enter the text to look for in the error.")
        if kind == "field_compare" and not (data.get("field") or "").strip():
            self.add_error("field", "Name the field to compare.")
        return data


def initial_tree(when: Any) -> dict[str, Any]:
    """Return a condition document as a tree of form initials: {"initial", "children"}."""
    if not isinstance(when, dict):
        when = {"type": "default"}
    logical = logical_type(when)
    if logical is not None:
        extra = {k: v for k, v in when.items() if k not in MANAGED_CONDITION_KEYS}
        if when.get("type") != logical:
            extra["type"] = when.get("type")
        if "operator" in when:
            extra["operator"] = when["operator"]
        children = [initial_tree(c) for c in when.get("conditions") or []]
        return {
            "initial": {
                "type": logical,
                "prev_type": logical,
                "extra": json.dumps(extra) if extra else "",
                "count": len(children),
            },
            "children": children,
        }
    kind = when.get("type") if when.get("type") in CONDITION_TYPE_LABELS else "default"
    extra = {k: v for k, v in when.items() if k not in MANAGED_CONDITION_KEYS}
    flags = when.get("flags")
    return {
        "initial": {
            "type": kind,
            "prev_type": kind,
            "operator": when.get("operator") or "",
            "value": _value_text(when.get("value")),
            "flags": list(flags) if isinstance(flags, str) else [],
            "unit": when.get("unit") or "",
            "evaluator": when.get("evaluator") or "",
            "prompt": when.get("prompt") or "",
            "field": when.get("field") or "",
            "extra": json.dumps(extra) if extra else "",
            "count": 0,
        },
        "children": [],
    }


def _posted_initial(data: Any, prefix: str) -> dict[str, Any]:
    def get(name: str) -> str:
        return str(data.get(f"{prefix}-{name}") or "")

    return {
        "type": get("type") or "default",
        "prev_type": get("prev_type"),
        "operator": get("operator"),
        "value": get("value"),
        "flags": data.getlist(f"{prefix}-flags") if hasattr(data, "getlist") else [],
        "unit": get("unit"),
        "evaluator": get("evaluator"),
        "prompt": get("prompt"),
        "field": get("field"),
        "extra": get("extra"),
        "count": whole_number(get("count")) or 0,
    }


def posted_tree(data: Any, prefix: str = "c", depth: int = 0) -> dict[str, Any]:
    """Read the builder's posted fields back into a tree of initials (to re-render it).

    A node whose type just changed is adapted: a condition turned into and/or/not becomes its
    first operand; an operator that the new type lacks is replaced by the type's first one.
    """
    initial = _posted_initial(data, prefix)
    kind, prev = initial["type"], initial["prev_type"] or initial["type"]
    children: list[dict[str, Any]] = []
    if kind in LOGICAL_TYPES:
        if prev in LOGICAL_TYPES and depth < MAX_CONDITION_DEPTH:
            children = [
                posted_tree(data, f"{prefix}.{k}", depth + 1)
                for k in range(min(initial["count"], 50))
            ]
        elif prev not in LOGICAL_TYPES:
            leaf = {**initial, "type": prev, "prev_type": prev, "count": 0}
            children = [{"initial": leaf, "children": []}]
        if kind == "not":
            children = children[:1]
        if not children:
            children = [initial_tree({"type": "default"})]
        initial.update(operator="", value="", count=len(children))
    else:
        operators = _operators(kind)
        if initial["operator"] not in operators:
            initial["operator"] = operators[0] if operators and kind != "default" else ""
        if prev != kind:
            initial["value"] = "" if prev in LOGICAL_TYPES else initial["value"]
    if prev != kind:
        initial["extra"] = ""
    initial["prev_type"] = kind
    return {"initial": initial, "children": children}


def tree_apply(tree: dict[str, Any], op: str, prefix: str = "c") -> dict[str, Any]:
    """Apply a builder button (`add:PREFIX`, `remove:PREFIX`) to a tree of initials."""
    action, _, where = op.partition(":")
    addable = tree["initial"]["type"] in ("and", "or") and len(tree["children"]) < 50
    if action == "add" and where == prefix and addable:
        tree["children"].append(initial_tree({"type": "length_check", "operator": "less_than"}))
    children = []
    for k, child in enumerate(tree["children"]):
        child_prefix = f"{prefix}.{k}"
        if action == "remove" and where == child_prefix:
            continue
        children.append(tree_apply(child, op, child_prefix))
    if not children and tree["initial"]["type"] in LOGICAL_TYPES:
        children = [initial_tree({"type": "default"})]
    tree["children"] = children
    tree["initial"]["count"] = len(children)
    return tree


@dataclass
class ConditionNode:
    """A condition form with its operand nodes, rendered recursively by the branch panel."""

    form: ConditionForm
    children: list[ConditionNode]
    prefix: str
    depth: int

    @property
    def can_add(self) -> bool:
        return self.form.kind in ("and", "or") and self.depth < MAX_CONDITION_DEPTH

    @property
    def can_remove_children(self) -> bool:
        return self.form.kind in ("and", "or") and len(self.children) > 1

    def is_valid(self) -> bool:
        valid = self.form.is_valid()
        for child in self.children:
            valid = child.is_valid() and valid
        if valid and self.form.is_logical:
            if self.form.kind == "not" and len(self.children) != 1:
                self.form.add_error(None, "Not takes exactly one condition.")
                return False
            if not self.children:
                self.form.add_error(None, "Add at least one condition.")
                return False
        return valid

    def condition(self) -> dict[str, Any]:
        return self.form.condition([c.condition() for c in self.children])

    def add_error(self, parts: list[str], message: str) -> None:
        """Show an error whose document path (below this condition) is `parts`."""
        if len(parts) >= 2 and parts[0] == "conditions" and whole_number(parts[1]) is not None:
            k = int(parts[1])
            if k < len(self.children):
                self.children[k].add_error(parts[2:], message)
                return
        name = parts[0] if parts else None
        if name not in self.form.fields or name in ("extra", "count", "prev_type"):
            name = None
        if name == "value" and not self.form.visible["value"]:
            name = None
        self.form.add_error(name, message)

    @property
    def has_errors(self) -> bool:
        return bool(self.form.errors) or any(c.has_errors for c in self.children)


def bound_node(
    data: Any, context: DocumentContext, prefix: str = "c", depth: int = 0
) -> ConditionNode:
    form = ConditionForm(data, prefix=prefix, context=context)
    children: list[ConditionNode] = []
    if form.kind in LOGICAL_TYPES and depth < MAX_CONDITION_DEPTH:
        raw = str(data.get(f"{prefix}-count") or "0")
        count = min(whole_number(raw) or 0, 50)
        children = [bound_node(data, context, f"{prefix}.{k}", depth + 1) for k in range(count)]
    return ConditionNode(form=form, children=children, prefix=prefix, depth=depth)


def unbound_node(
    tree: dict[str, Any], context: DocumentContext, prefix: str = "c", depth: int = 0
) -> ConditionNode:
    form = ConditionForm(initial=tree["initial"], prefix=prefix, context=context)
    children = [
        unbound_node(child, context, f"{prefix}.{k}", depth + 1)
        for k, child in enumerate(tree["children"])
    ]
    return ConditionNode(form=form, children=children, prefix=prefix, depth=depth)


# -- branches --------------------------------------------------------------------------------


class BranchForm(forms.Form):
    name = forms.CharField(max_length=200)
    priority = forms.IntegerField(min_value=1, help_text="1 is evaluated first.")
    active = forms.BooleanField(required=False, initial=True)
    action = forms.ChoiceField(choices=())
    target = forms.ChoiceField(choices=(), required=False)
    retry_suffix = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    prompt_enhancement = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    alternative_actor = forms.ChoiceField(choices=(), required=False)
    max_retries = forms.IntegerField(min_value=0, required=False)
    other_params = PrettyJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Any other parameters, as a JSON object.",
    )

    MANAGED_PARAMS = ("retry_suffix", "prompt_enhancement", "alternative_actor", "max_retries")

    def __init__(
        self,
        *args: Any,
        context: DocumentContext,
        step_index: int,
        branch_index: int,
        **kwargs: Any,
    ) -> None:
        self.context = context
        self.step_index = step_index
        self.branch_index = branch_index
        self.step = context.steps[step_index]
        branches = self.step.get("branches") or []
        self.original = copy.deepcopy(branches[branch_index])
        if not args or args[0] is None:
            kwargs.setdefault("initial", self.initial_from(self.original))
        super().__init__(*args, **kwargs)
        action = _text(self.original.get("action"))
        actions = list(ACTIONS)
        if action and action not in actions:
            actions.append(action)
        self.fields["action"].choices = [(a, a) for a in actions]
        targets: list[tuple[str, str]] = [("", "— none (next step in sequence)")]
        targets += [
            (s["key"], f"{s.get('name') or s['key']} ({s['key']})")
            for s in context.steps
            if isinstance(s.get("key"), str)
        ]
        targets += [
            ("@repeat", "@repeat — run this step again"),
            ("@end", "@end — stop the run"),
            ("@complete", "@complete — finish successfully"),
        ]
        current = _text(self.original.get("target"))
        if current and current not in {t[0] for t in targets}:
            targets.append((current, f"{current} (missing step)"))
        self.fields["target"].choices = targets
        self.fields["alternative_actor"].choices = context.alias_choices("— best other actor")
        self.notes: list[str] = []
        self.result: dict[str, Any] | None = None

    @classmethod
    def initial_from(cls, branch: dict[str, Any]) -> dict[str, Any]:
        params = branch.get("params") if isinstance(branch.get("params"), dict) else {}
        other = {k: v for k, v in params.items() if k not in cls.MANAGED_PARAMS}
        return {
            "name": branch.get("name", ""),
            "priority": branch.get("priority"),
            "active": branch.get("active", True) is not False,
            "action": branch.get("action", "CONTINUE"),
            "target": branch.get("target", ""),
            "retry_suffix": _text(params.get("retry_suffix")),
            "prompt_enhancement": _text(params.get("prompt_enhancement")),
            "alternative_actor": _text(params.get("alternative_actor")),
            "max_retries": params.get("max_retries"),
            "other_params": other or None,
        }

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        siblings = self.step.get("branches") or []
        for j, other in enumerate(siblings):
            if j != self.branch_index and isinstance(other, dict) and other.get("name") == name:
                raise ValidationError(f"Another branch of this step is called '{name}'.")
        return name

    def clean_priority(self) -> int:
        priority = self.cleaned_data["priority"]
        siblings = self.step.get("branches") or []
        for j, other in enumerate(siblings):
            if (
                j != self.branch_index
                and isinstance(other, dict)
                and other.get("priority") == priority
            ):
                raise ValidationError(
                    f"The branch '{other.get('name')}' has priority {priority} already."
                )
        return priority

    def clean_other_params(self) -> dict[str, Any]:
        value = self.cleaned_data.get("other_params")
        if value in (None, ""):
            return {}
        if not isinstance(value, dict):
            raise ValidationError('Write a JSON object, e.g. {"note": "…"}.')
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        action = canonical_action(data["action"])
        target = data.get("target") or ""
        key = self.step.get("key")
        steps = self.context.step_keys
        if action in REPEAT_ACTIONS and target not in ("", "@repeat", key):
            self.notes.append(f"{action} runs this step again, so the target is @repeat.")
            data["target"] = "@repeat"
        elif action == "END_RECIPE" and target not in ("", "@end"):
            self.notes.append("END_RECIPE stops the run, so the target is @end.")
            data["target"] = "@end"
        elif action == "SKIP_TO_END" and target not in ("", steps[-1] if steps else ""):
            self.notes.append("SKIP_TO_END goes to the last step, so the target is left empty.")
            data["target"] = ""
        return data

    def build(self, when: dict[str, Any]) -> dict[str, Any]:
        data = self.cleaned_data
        params = dict(data.get("other_params") or {})
        for name in ("retry_suffix", "prompt_enhancement"):
            if data.get(name):
                params[name] = _normalise_newlines(data[name])
        if data.get("alternative_actor"):
            params["alternative_actor"] = data["alternative_actor"]
        if data.get("max_retries") is not None:
            params["max_retries"] = data["max_retries"]
        branch = {
            k: v
            for k, v in self.original.items()
            if k not in ("name", "priority", "when", "action", "target", "params", "active")
        }
        branch.update(
            {
                "name": data["name"],
                "priority": data["priority"],
                "when": when,
                "action": data["action"],
                "target": data.get("target") or "",
            }
        )
        if params:
            branch["params"] = params
        if not data.get("active"):
            branch["active"] = False
        return branch


FIELD_OF_BRANCH_PATH = {
    "name": "name",
    "priority": "priority",
    "action": "action",
    "target": "target",
    "active": "active",
}


@dataclass
class BranchPanel:
    """The branch form and its condition builder, validated together against the document."""

    context: DocumentContext
    step_index: int
    branch_index: int
    data: Any = None
    op: str = ""
    form: BranchForm = field(init=False)
    condition: ConditionNode = field(init=False)
    result: dict[str, Any] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        kwargs = {
            "context": self.context,
            "step_index": self.step_index,
            "branch_index": self.branch_index,
        }
        if self.data is None:
            self.form = BranchForm(**kwargs)
            self.condition = unbound_node(
                initial_tree(self.form.original.get("when")), self.context
            )
        elif self.op:
            # A builder button or a type change: re-render what was typed (errors are not shown).
            self.form = BranchForm(self.data, **kwargs)
            tree = tree_apply(posted_tree(self.data), self.op)
            self.condition = unbound_node(tree, self.context)
        else:
            self.form = BranchForm(self.data, **kwargs)
            self.condition = bound_node(self.data, self.context)

    @property
    def step(self) -> dict[str, Any]:
        return self.form.step

    def is_valid(self) -> bool:
        if self.data is None or self.op:
            return False
        valid = self.form.is_valid()
        valid = self.condition.is_valid() and valid
        if not valid:
            return False
        branch = self.form.build(self.condition.condition())
        candidate = copy.deepcopy(self.context.document)
        candidate["steps"][self.step_index]["branches"][self.branch_index] = branch
        errors = document_errors(candidate)
        prefix = f"steps[{self.step_index}].branches[{self.branch_index}]"
        found = False
        for parts, message in _errors_under(errors, prefix):
            found = True
            head = parts[0] if parts else ""
            if head == "when":
                self.condition.add_error(parts[1:], message)
            elif head == "params":
                name = parts[1] if len(parts) > 1 else ""
                target = name if name in BranchForm.MANAGED_PARAMS else "other_params"
                self.form.add_error(target, message)
            else:
                self.form.add_error(FIELD_OF_BRANCH_PATH.get(head), message)
        if found:
            return False
        self.result = branch
        return True


# -- test runs -------------------------------------------------------------------------------

SCRIPT_SEPARATOR = re.compile(r"^\s*---\s*$", re.MULTILINE)


def split_answers(text: str) -> list[str]:
    """Split a scripted-answers box into answers: one per block, blocks separated by `---`."""
    text = _normalise_newlines(text)
    return [a.strip("\n") for a in SCRIPT_SEPARATOR.split(text) if a.strip()]


class RecipeTestForm(forms.Form):
    name = forms.CharField(max_length=200)
    inputs = StorableJSONField(required=False)
    script = StorableJSONField(required=False)
    expected_path = forms.CharField(
        help_text="Step keys in the order the run takes them, separated by →, > or commas."
    )
    expected_status = forms.ChoiceField(
        required=False,
        choices=[
            ("", "any"),
            ("succeeded", "succeeded"),
            ("ended", "ended"),
            ("failed", "failed"),
            ("waiting_human", "waiting for a reviewer"),
        ],
    )

    def __init__(self, *args: Any, recipe: Recipe, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recipe = recipe

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if self.recipe.tests.filter(name=name).exists():
            raise ValidationError(f"A test called '{name}' exists already.")
        return name

    def clean_inputs(self) -> dict[str, Any]:
        value = self.cleaned_data.get("inputs")
        if value in (None, ""):
            return {}
        if not isinstance(value, dict):
            raise ValidationError("Inputs are a JSON object of name: value.")
        return value

    def clean_script(self) -> dict[str, list[str]]:
        value = self.cleaned_data.get("script")
        if value in (None, ""):
            return {}
        if not isinstance(value, dict) or not all(
            isinstance(v, list) and all(isinstance(a, str) for a in v) for v in value.values()
        ):
            raise ValidationError("The script is a JSON object of alias: [answers].")
        return value

    def clean_expected_path(self) -> list[str]:
        raw = self.cleaned_data["expected_path"]
        keys = [k.strip() for k in re.split(r"→|->|>|,", raw) if k.strip()]
        if not keys:
            raise ValidationError("Name at least one step.")
        return keys


class PublishForm(forms.Form):
    note = forms.CharField(max_length=500, required=False, label="Note (optional)")
    # The draft revision the page showed; without one, whatever the draft is now is published.
    revision = forms.CharField(required=False, widget=forms.HiddenInput)

    def clean_revision(self) -> int | None:
        raw = self.cleaned_data["revision"]
        if raw == "":
            return None
        if (number := whole_number(raw)) is None:
            raise forms.ValidationError("not a draft revision; reload the page")
        return number
