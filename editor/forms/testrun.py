"""The test-run forms: a dry run's inputs and scripted answers, and saving a run as a test."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from runner.run_files import max_bytes, upload_of
from workflows.engine.files import DEFAULT_MAX_FILES, FILES, describe_accept, is_file_type
from workflows.models import Recipe

from .fields import StorableJSONField, normalise_newlines

SCRIPT_SEPARATOR = re.compile(r"^\s*---\s*$", re.MULTILINE)
# A script's hits of a step with sources (`sources.STEPKEY`), and where its errors point.
SCRIPT_HITS = "sources."
# A script's answers of a tool (`tool.SERVER.TOOL`), given instead of calling its server.
SCRIPT_TOOL = "tool."
# A script's answers of an http step (`http.STEPKEY`), given instead of sending its request.
SCRIPT_HTTP = "http."
_HITS_ERROR = re.compile(r"sources\.([A-Za-z0-9][A-Za-z0-9_-]*)")


def split_answers(text: str) -> list[str]:
    """Split a scripted-answers box into answers: one per block, blocks separated by `---`."""
    text = normalise_newlines(text)
    return [a.strip("\n") for a in SCRIPT_SEPARATOR.split(text) if a.strip()]


class SaveAsTestForm(forms.Form):
    """The name of the test a finished run is saved as (blank: "Run #N")."""

    # Room for the " (2)" the service adds to a blank name's "Run #N" taken already.
    name = forms.CharField(max_length=190, required=False, label="Test name")

    def __init__(self, *args: Any, recipe: Recipe, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recipe = recipe

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if name and self.recipe.tests.filter(name=name).exists():
            raise ValidationError(f"A test called '{name}' exists already: choose another name.")
        return name


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

    def clean_script(self) -> dict[str, list[Any]]:
        value = self.cleaned_data.get("script")
        if value in (None, ""):
            return {}
        # An alias answers with text; `sources.STEPKEY` gives a list of hits per execution.
        if not isinstance(value, dict) or not all(
            isinstance(v, list)
            and all(isinstance(a, list if k.startswith(SCRIPT_HITS) else str) for a in v)
            for k, v in value.items()
        ):
            raise ValidationError(
                "The script is a JSON object of alias: [answers] (and sources.STEP: [[hits]])."
            )
        return value

    def clean_expected_path(self) -> list[str]:
        raw = self.cleaned_data["expected_path"]
        keys = [k.strip() for k in re.split(r"→|->|>|,", raw) if k.strip()]
        if not keys:
            raise ValidationError("Name at least one step.")
        return keys


class MultipleFileInput(forms.FileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (a `files` input): a list of them, in the order chosen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> Any:
        one = super().clean
        if isinstance(data, (list, tuple)):
            return [one(item, initial) for item in data]
        return [one(data, initial)] if data else []


def file_field(kind: str, spec: dict[str, Any], *, required: bool, label: str) -> forms.Field:
    """The run form's field of a file input: the browser told what it accepts and how large
    a file may be; the run checks it all the same (`runner.run_files.take_uploads`)."""
    accept = spec.get("accept") if isinstance(spec.get("accept"), list) else None
    limit = max_bytes(spec)
    attrs = {"data-file-drop": "", "data-max-bytes": str(limit)}
    if accept:
        attrs["accept"] = ",".join(accept)
    help_text = f"{describe_accept(accept)}; at most {limit:,} bytes"
    field: forms.Field
    if kind == FILES:
        most = spec.get("max_files", DEFAULT_MAX_FILES)
        attrs["data-max-files"] = str(most)
        field = MultipleFileField(
            required=required, label=label, widget=MultipleFileInput(attrs=attrs)
        )
        help_text += f" each, up to {most} files"
    else:
        field = forms.FileField(required=required, label=label, widget=forms.FileInput(attrs=attrs))
    field.help_text = f"{help_text}. Drop files here or choose them."
    return field


class TestRunForm(forms.Form):
    """Inputs and scripted answers for a dry run, built from the version's inputs and actors."""

    # The form field of input NAME is INPUT_PREFIX + NAME.
    INPUT_PREFIX = "input_"

    # How the run's classify steps classify (shown when the recipe has one).
    classification = forms.ChoiceField(
        required=False,
        label="Classification",
        choices=[
            ("", "as the deployment says (CLASSIFICATION_BYPASS)"),
            ("ask", "ask the classifier"),
            ("bypass", "bypass: select the always-active routes, ask no model"),
        ],
    )

    def __init__(self, *args: Any, document: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        steps_ = document.get("steps") if isinstance(document.get("steps"), list) else []
        self.classifies = any(isinstance(s, dict) and s.get("kind") == "classify" for s in steps_)
        self.input_names: list[str] = []
        self.aliases: list[tuple[str, str]] = []
        self.has_files = False  # the form is sent as multipart/form-data
        inputs = document.get("inputs") if isinstance(document.get("inputs"), dict) else {}
        for name, spec in inputs.items():
            spec = spec if isinstance(spec, dict) else {}
            kind = spec.get("type", "string")
            required = bool(spec.get("required")) and spec.get("default") is None
            label = f"{name} ({kind})"
            field: forms.Field
            if is_file_type(kind):
                field = file_field(kind, spec, required=required, label=label)
                self.has_files = True
            elif kind == "number":
                field = forms.FloatField(required=required, label=label)
            elif kind == "integer":
                field = forms.IntegerField(required=required, label=label)
            elif kind == "boolean":
                field = forms.BooleanField(required=False, label=label)
            elif kind in ("object", "array"):
                field = StorableJSONField(required=required, label=f"{label}, JSON")
            else:
                field = forms.CharField(
                    required=required,
                    label=label,
                    strip=False,
                    widget=forms.Textarea(attrs={"rows": 2}),
                )
            if spec.get("description"):
                # A file field's help says what it takes: the description comes first.
                said = f" ({field.help_text})" if is_file_type(kind) else ""
                field.help_text = f"{spec['description']}{said}"
            if "default" in spec:
                # Shown filled in, so the person running sees what the run will use; a field
                # emptied is left out of the inputs and the run takes the default all the same.
                field.initial = spec["default"]
            self.fields[f"{self.INPUT_PREFIX}{name}"] = field
            self.input_names.append(name)
        actors = document.get("actors") if isinstance(document.get("actors"), dict) else {}
        for alias, reference in actors.items():
            self.fields[f"script_{alias}"] = forms.CharField(
                required=False,
                strip=False,
                label=f"Answers of {alias} ({reference})",
                widget=forms.Textarea(attrs={"rows": 3}),
                help_text="One answer per block, blocks separated by a line of ---; the last "
                "repeats. Reviewers answer approve, reject, or revise: comment.",
            )
            self.aliases.append((alias, str(reference)))
        # Steps with sources: hits to use instead of searching.
        self.searching: list[str] = []
        steps = document.get("steps") if isinstance(document.get("steps"), list) else []
        for step in steps:
            if isinstance(step, dict) and step.get("sources") and isinstance(step.get("key"), str):
                key = step["key"]
                self.fields[f"script_{SCRIPT_HITS}{key}"] = StorableJSONField(
                    required=False,
                    label=f"Hits of {key}, JSON (instead of searching)",
                    widget=forms.Textarea(attrs={"rows": 3}),
                    help_text='A list per execution of [{"document", "text", "score", '
                    '"heading"}]; [] finds nothing; the last repeats. Empty: search.',
                )
                self.searching.append(key)
        # Tools the steps call: answers to give instead of calling their servers.
        self.tools: list[str] = []
        for step in steps:
            if not isinstance(step, dict):
                continue
            named = step.get("tools") if isinstance(step.get("tools"), list) else []
            named = [*named, step.get("tool")] if step.get("kind") == "tool" else named
            for tool in named:
                if isinstance(tool, str) and tool and tool not in self.tools:
                    self.tools.append(tool)
        for tool in self.tools:
            self.fields[f"script_{SCRIPT_TOOL}{tool}"] = forms.CharField(
                required=False,
                strip=False,
                label=f"Answers of tool {tool}",
                widget=forms.Textarea(attrs={"rows": 2}),
                help_text="Instead of calling the tool: one answer (text or JSON) per call, "
                "blocks separated by a line of ---; the last repeats; '@error: why' fails "
                "the call. Empty: call the tool's server.",
            )
        # Http steps: answers to give instead of sending their requests.
        self.requests = [
            step["key"]
            for step in steps
            if isinstance(step, dict)
            and step.get("kind") == "http"
            and isinstance(step.get("key"), str)
        ]
        for key in self.requests:
            self.fields[f"script_{SCRIPT_HTTP}{key}"] = StorableJSONField(
                required=False,
                label=f"Answers of {key}, JSON (instead of sending the request)",
                widget=forms.Textarea(attrs={"rows": 2}),
                help_text='A list of answers, one per request: {"status": 200, "body": ...} or '
                'text; "@error: why" fails the request; the last repeats. Empty: send it.',
            )

    @property
    def input_fields(self) -> list[forms.BoundField]:
        return [self[f"{self.INPUT_PREFIX}{n}"] for n in self.input_names]

    @property
    def script_fields(self) -> list[forms.BoundField]:
        names = [a for a, _ in self.aliases] + [f"{SCRIPT_HITS}{k}" for k in self.searching]
        names += [f"{SCRIPT_TOOL}{t}" for t in self.tools]
        names += [f"{SCRIPT_HTTP}{k}" for k in self.requests]
        return [self[f"script_{name}"] for name in names]

    def inputs(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in self.input_names:
            value = self.cleaned_data.get(f"{self.INPUT_PREFIX}{name}")
            if isinstance(value, list) and isinstance(
                self.fields[f"{self.INPUT_PREFIX}{name}"], forms.FileField
            ):
                if value:
                    values[name] = [upload_of(item) for item in value]
            elif isinstance(self.fields[f"{self.INPUT_PREFIX}{name}"], forms.FileField):
                if value:
                    values[name] = upload_of(value)
            elif value not in (None, ""):
                values[name] = value
        return values

    def script(self) -> dict[str, Any]:
        script: dict[str, Any] = {}
        for alias, _ in self.aliases:
            answers = split_answers(self.cleaned_data.get(f"script_{alias}") or "")
            if answers:
                script[alias] = answers
        for key in self.searching:
            hits = self.cleaned_data.get(f"script_{SCRIPT_HITS}{key}")
            if hits not in (None, ""):
                script[f"{SCRIPT_HITS}{key}"] = hits  # run_start checks them
        for tool in self.tools:
            answers = split_answers(self.cleaned_data.get(f"script_{SCRIPT_TOOL}{tool}") or "")
            if answers:
                script[f"{SCRIPT_TOOL}{tool}"] = answers
        for key in self.requests:
            answered = self.cleaned_data.get(f"script_{SCRIPT_HTTP}{key}")
            if answered not in (None, "", []):
                script[f"{SCRIPT_HTTP}{key}"] = answered  # run_start checks them
        return script

    def add_run_errors(self, errors: list[str]) -> None:
        for error in errors:
            path, _, message = error.partition(": ")
            head, _, name = path.partition(".")
            if head == "inputs" and "[" in name:  # one file of a files input
                name, message = name.partition("[")[0], f"{path}: {message}"
            if head == "script" and (hits := _HITS_ERROR.match(name)):
                name, message = hits.group(0), f"{path}: {message}"
            elif head == "script" and name.startswith((SCRIPT_TOOL, SCRIPT_HTTP)) and "[" in name:
                name, message = name.partition("[")[0], f"{path}: {message}"
            field = {"inputs": f"{self.INPUT_PREFIX}{name}", "script": f"script_{name}"}.get(head)
            self.add_error(field if field in self.fields else None, message or error)
