"""The recipe-level forms: a new recipe, a file import, the settings panel and publishing."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.text import slugify

from workflows.engine.budget import (
    MAX_CALLS_LIMIT,
    MAX_COST_LIMIT,
    MAX_SECONDS_LIMIT,
    MAX_TOKENS_LIMIT,
    MIN_COST_LIMIT,
)
from workflows.engine.files import DEFAULT_MAX_FILES, FILES, MAX_FILES, is_file_type
from workflows.engine.vocabulary import INPUT_TYPES
from workflows.models import SLUG_VALIDATOR, Recipe
from workflows.validators import RESERVED_SLUGS, json_value_errors, whole_number

from ..selectors import actor_choices, document_errors
from .fields import as_text, normalise_newlines

ALIAS = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


class BudgetForm(forms.Form):
    """The limits of each run of the recipe (`budget`); an empty field sets no limit."""

    max_tokens = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TOKENS_LIMIT,
        label="Tokens",
        help_text="input and output tokens of all the run's model calls",
    )
    max_cost = forms.DecimalField(
        required=False,
        min_value=MIN_COST_LIMIT,
        max_value=MAX_COST_LIMIT,
        decimal_places=8,
        label="Cost",
        help_text="in the actors' currency, at their prices",
    )
    max_calls = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_CALLS_LIMIT,
        label="Model calls",
        help_text="answers, validation attempts, judges, evaluators, classifiers…",
    )
    max_seconds = forms.DecimalField(
        required=False,
        min_value=1,
        max_value=MAX_SECONDS_LIMIT,
        decimal_places=3,
        label="Seconds",
        help_text="wall time since the run started, waits for reviewers included",
    )

    def limits(self) -> dict[str, int | float] | None:
        """Return the limits set, as the document writes them; None when none is."""
        budget: dict[str, int | float] = {}
        for name, value in self.cleaned_data.items():
            if value is None:
                continue
            if isinstance(value, Decimal):
                number = float(value)
                budget[name] = int(number) if number.is_integer() else number
            else:
                budget[name] = value
        return budget or None


def _budget_initial(budget: object) -> dict[str, Any]:
    """Return a document's budget as the form shows it (a wrong value as written: the
    engine names its problem)."""
    if not isinstance(budget, dict):
        return {}
    return {name: budget.get(name) for name in BudgetForm.base_fields if name in budget}


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
    # A file or files input's (`workflows.engine.files`).
    accept = forms.CharField(
        required=False,
        max_length=1000,
        help_text="File inputs: the media types taken, separated by commas (e.g. "
        "application/pdf, image/*). Empty: any type.",
    )
    max_bytes = forms.IntegerField(
        required=False, min_value=1, help_text="File inputs: the largest file, in bytes."
    )
    max_files = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_FILES,
        help_text=f"Files inputs: how many files at most (default {DEFAULT_MAX_FILES}).",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if name and not INPUT_NAME.match(name):
            raise ValidationError("Use letters, digits and _ (not starting with a digit).")
        return name

    def clean_accept(self) -> list[str]:
        raw = self.cleaned_data.get("accept") or ""
        return [item.strip().lower() for item in raw.split(",") if item.strip()]

    def file_spec(self) -> dict[str, Any]:
        """The file fields of the input's spec, those given."""
        data = self.cleaned_data
        spec: dict[str, Any] = {}
        if data.get("accept"):
            spec["accept"] = data["accept"]
        for name in ("max_bytes", "max_files"):
            if data.get(name) is not None:
                spec[name] = data[name]
        return spec

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        data["type"] = data.get("type") or "string"
        kind = data["type"]
        for name in ("accept", "max_bytes", "max_files"):
            if data.get(name) not in (None, "", []) and not is_file_type(kind):
                self.add_error(name, "Only a file or files input takes this.")
        if data.get("max_files") is not None and is_file_type(kind) and kind != FILES:
            self.add_error("max_files", "Only a files input takes several files.")
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
        "description": as_text(spec.get("description")),
        "accept": ", ".join(a for a in spec.get("accept") or [] if isinstance(a, str))
        if isinstance(spec.get("accept"), list)
        else "",
        "max_bytes": spec.get("max_bytes"),
        "max_files": spec.get("max_files"),
    }


def _reference_choices(current: list[str]) -> list[tuple[str, str]]:
    choices = [(c.reference, c.label) for c in actor_choices()]
    known = {c[0] for c in choices}
    choices += [(r, f"{r} (unknown)") for r in current if r and r not in known]
    return choices


@dataclass
class RecipeSettings:
    """The recipe-level form: name, description, inputs, actor aliases and the budget."""

    document: dict[str, Any]
    data: Any = None
    form: RecipeForm = field(init=False)
    inputs: Any = field(init=False)
    actors: Any = field(init=False)
    budget: BudgetForm = field(init=False)
    result: dict[str, Any] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        doc = self.document
        inputs = doc.get("inputs") if isinstance(doc.get("inputs"), dict) else {}
        actors = doc.get("actors") if isinstance(doc.get("actors"), dict) else {}
        self.form = RecipeForm(
            self.data,
            prefix="recipe",
            initial={
                "name": as_text(doc.get("name")),
                "description": as_text(doc.get("description")),
            },
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
        self.budget = BudgetForm(
            self.data, prefix="budget", initial=_budget_initial(doc.get("budget"))
        )

    def all_forms(self) -> list[forms.Form]:
        """Return the settings' forms: the recipe's, each input's and alias's, the budget's."""
        return [self.form, *self.inputs.forms, *self.actors.forms, self.budget]

    def is_valid(self) -> bool:
        valid = (
            self.form.is_valid()
            & self.inputs.is_valid()
            & self.actors.is_valid()
            & self.budget.is_valid()
        )
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
            spec.update(form.file_spec())
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
            "description": normalise_newlines(self.form.cleaned_data["description"]),
            "inputs": inputs,
            "actors": actors,
            # None clears a budget the document had (the editor drops the key).
            "budget": self.budget.limits(),
        }
        candidate = {**self.document, **self.result}
        before = set(document_errors(self.document))
        # Only the errors this change causes block it (e.g. removing an alias steps use).
        caused = [e for e in document_errors(candidate) if e not in before]
        for error in caused:
            path, _, message = error.partition(": ")
            if path == "name":
                self.form.add_error("name", message)
            elif path.startswith("budget.") and path[7:] in self.budget.fields:
                self.budget.add_error(path[7:], message)
            else:
                self.form.add_error(None, error)
        return not caused


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
