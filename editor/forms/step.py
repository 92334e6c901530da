"""The step panel's form: a step's settings, checked against the whole document."""

from __future__ import annotations

import copy
import re
from typing import Any

from django import forms
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ValidationError

from workflows.engine.intent import MAX_ATTEMPTS_LIMIT as MAX_INTENT_ATTEMPTS
from workflows.engine.output_schema import MAX_ATTEMPTS as MAX_SCHEMA_ATTEMPTS
from workflows.engine.self_check import MAX_VALIDATION_ATTEMPTS

from ..catalog import kinds_taking, step_kinds
from ..selectors import document_errors
from .actors import ActorPicker
from .builders import BUILDER, RoutesBuilder, TreeBuilder, read_routes, read_tree, route_targets
from .document import DocumentContext, errors_under
from .fields import PrettyJSONField, normalise_newlines
from .http import FIELDS as HTTP_FIELDS
from .http import POSTED as HTTP_POSTED
from .http import HttpForm
from .sources import PREFIX as SOURCES_PREFIX
from .sources import BaseSourceFormSet, sources_formset
from .tools import ToolSections

STEP_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
# The fields of this form that only some step kinds hold (the catalog says which): shown and
# kept for those kinds only.
KIND_FIELDS = (
    "options",
    "escalate_to",
    "tree",
    "leaf_targets",
    "routes",
    "bypass",
    "max_reclassify",
    "output_schema",
    "output_schema_attempts",
    "set",
    "requires",
    "images",
    "detect",
)
# The tools fields: written from the Tools sections (editor/forms/tools.py) for the kinds that
# hold them, kept as they were when a post has no such section.
LLM_TOOL_FIELDS = ("tools", "max_tool_calls", "max_tool_seconds")
TOOL_STEP_FIELDS = ("tool", "arguments")
# The actor pickers of this form: (field, what no choice means, reviewers only).
PICKERS = (
    ("actor", "—", False),
    ("judge", "— no judge", False),
    ("escalate_to", "— no escalation", True),
)


class StepForm(forms.Form):
    key = forms.CharField(
        max_length=100, help_text="Stable id of the step: letters, digits, '-' and '_'."
    )
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=())
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
    max_attempts = forms.IntegerField(
        min_value=1, max_value=MAX_VALIDATION_ATTEMPTS, required=False, initial=5
    )
    judge = forms.ChoiceField(choices=(), required=False)
    fallback = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, strip=False
    )
    options = forms.CharField(
        required=False,
        help_text="Reviewer options, comma separated (default: approve, reject, revise).",
    )
    escalate_to = forms.ChoiceField(
        choices=(),
        required=False,
        help_text="A reviewer group that gets the task once when it is overdue.",
    )
    tree = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 8}))
    leaf_targets = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    routes = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 8}))
    bypass = forms.BooleanField(required=False, label="Select every route (bypass)")
    max_reclassify = forms.IntegerField(min_value=0, max_value=10, required=False)
    output_schema = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 8}))
    output_schema_attempts = forms.IntegerField(
        min_value=1, max_value=MAX_SCHEMA_ATTEMPTS, required=False, label="Schema attempts"
    )
    # What the step's actor must be able to do: ["vision", {"context": 8192}].
    requires = PrettyJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='JSON: capability names and {"context": TOKENS}; the engine checks them.',
    )
    # An llm step's `images`: ["photo", {"input": "scan", "pages": "1-2"}].
    images = PrettyJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='JSON: file inputs shown to the model, names or {"input", "pages"}.',
    )
    # A transform step's `set`: fact name -> JMESPath expression.
    set = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 6}))
    # A decision tree's detectors: {"pii": {...}, "keywords": {...}, "safety": {...}}.
    detect = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 5}))
    # An intent step's `max_attempts`; `max_attempts` above is the validation loop's.
    intent_max_attempts = forms.IntegerField(
        min_value=1, max_value=MAX_INTENT_ATTEMPTS, required=False, label="Attempts"
    )

    FIELD_PATHS = {
        "key": "key",
        "name": "name",
        "kind": "kind",
        "actor": "actor",
        "prompt": "prompt",
        "timeout_s": "timeout_s",
        "validation": "threshold",
        "options": "options",
        "escalate_to": "escalate_to",
        "tree": "tree",
        "leaf_targets": "leaf_targets",
        "routes": "routes",
        "bypass": "bypass",
        "max_reclassify": "max_reclassify",
        "max_attempts": "intent_max_attempts",
        "output_schema": "output_schema",
        "output_schema_attempts": "output_schema_attempts",
        "set": "set",
        "requires": "requires",
        "images": "images",
        "detect": "detect",
    }
    VALIDATION_PATHS = {
        "threshold": "threshold",
        "max_attempts": "max_attempts",
        "judge": "judge",
        "fallback": "fallback",
    }

    def __init__(
        self,
        *args: Any,
        context: DocumentContext,
        index: int,
        user: AbstractBaseUser | AnonymousUser | None = None,
        **kwargs: Any,
    ) -> None:
        self.context = context
        self.index = index
        self.original = copy.deepcopy(context.steps[index])
        data = args[0] if args else None
        # A post without the Sources rows (an older page, a script) leaves the sources as they are.
        self.sources_posted = data is not None and f"{SOURCES_PREFIX}-TOTAL_FORMS" in data
        self.sources: BaseSourceFormSet = sources_formset(
            data if self.sources_posted else None, sources=self.original.get("sources"), user=user
        )
        self.tools = ToolSections(data, step=self.original)
        self.http_posted = data is not None and HTTP_POSTED in data
        self.http = HttpForm(data if self.http_posted else None, step=self.original)
        if not args or args[0] is None:
            kwargs.setdefault(
                "initial", {**self.initial_from(self.original), "sequence": index + 1}
            )
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = [(k["kind"], k["label"]) for k in step_kinds()]
        self.kind_only = {
            name: " ".join(kinds_taking(name))
            for name in (*KIND_FIELDS, "sources", "tools", "arguments", "url")
        }
        self.kind_only["intent_max_attempts"] = " ".join(kinds_taking("max_attempts"))
        self.fields["sequence"] = forms.IntegerField(
            min_value=1,
            max_value=len(context.steps),
            help_text=self.fields["sequence"].help_text,
        )
        # One menu of actors for each picker; picking an actor with no alias adds one.
        self.picker = ActorPicker(context)
        held = self.initial_from(self.original)
        for name, blank, reviewers_only in PICKERS:
            current = str(held[name] or "")
            self.fields[name].choices = self.picker.choices(
                blank, current, reviewers_only=reviewers_only
            )
        self.result: dict[str, Any] | None = None
        # The tree and the routes are shown in visual builders; a post without a builder
        # (`tree_mode`/`routes_mode` not "builder") holds their JSON text, as before.
        targets = route_targets(self.original)
        if self.is_bound:
            self.tree_builder = TreeBuilder.from_post(self.data, context.step_keys)
            self.routes_builder = RoutesBuilder.from_post(self.data, targets)
        else:
            self.tree_builder = TreeBuilder.from_value(
                self.original.get("tree"),
                self.original.get("leaf_targets"),
                BUILDER,
                context.step_keys,
            )
            self.routes_builder = RoutesBuilder.from_value(
                self.original.get("routes"), BUILDER, targets
            )

    def all_forms(self) -> list[forms.Form]:
        """Return this form and the sections posted with it that its kind holds (sources,
        tools, request): those checked with it."""
        kind = str(self.data.get("kind", ""))
        found: list[forms.Form] = [self]
        if self.sources_posted and self._takes_sources(kind):
            found += self.sources.forms
        if self.tools.posted and self._takes("tools", kind):
            found.append(self.tools.llm)
        if self.tools.posted and self._takes("arguments", kind):
            found += [self.tools.step, self.tools.arguments]
        if self.http_posted and self._takes("url", kind):
            found.append(self.http)
        return found

    @property
    def actors_added(self) -> dict[str, str]:
        """The aliases the pickers added (actor name: reference)."""
        return self.picker.added

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
            "escalate_to": step.get("escalate_to") or "",
            "tree": step.get("tree"),
            "leaf_targets": step.get("leaf_targets"),
            "routes": step.get("routes"),
            "bypass": bool(step.get("bypass")),
            "max_reclassify": step.get("max_reclassify"),
            "intent_max_attempts": step.get("max_attempts"),
            "output_schema": step.get("output_schema"),
            "output_schema_attempts": step.get("output_schema_attempts"),
            "set": step.get("set"),
            "requires": step.get("requires"),
            "images": step.get("images"),
            "detect": step.get("detect"),
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
        return normalise_newlines(self.cleaned_data["prompt"])

    def clean_fallback(self) -> str:
        return normalise_newlines(self.cleaned_data["fallback"])

    def clean_options(self) -> list[str] | None:
        raw = self.cleaned_data["options"]
        options = [o.strip() for o in raw.split(",") if o.strip()]
        return options or None

    def _takes_sources(self, kind: str) -> bool:
        return kind in self.kind_only["sources"].split()

    def _takes(self, field: str, kind: str) -> bool:
        return kind in self.kind_only[field].split()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        if (
            self.sources_posted
            and self._takes_sources(data["kind"])
            and not self.sources.is_valid()
        ):
            self.add_error(None, "A source is not right: see Sources.")
            return data
        if self.tools.posted:
            if self._takes("tools", data["kind"]) and not self.tools.llm_valid():
                self.add_error(None, "A tool setting is not right: see Tools.")
                return data
            if self._takes("arguments", data["kind"]) and not self.tools.tool_valid():
                self.add_error(None, "The tool or an argument is not right: see Tool call.")
                return data
        if self.http_posted and self._takes("url", data["kind"]) and not self.http.is_valid():
            self.add_error(None, "A request setting is not right: see Request.")
            return data
        if self.data.get("tree_mode") == BUILDER and self._takes("tree", data["kind"]):
            data["tree"], data["leaf_targets"] = read_tree(
                self.data, data.get("tree"), data.get("leaf_targets")
            )
        if self.data.get("routes_mode") == BUILDER and self._takes("routes", data["kind"]):
            data["routes"] = read_routes(self.data, data.get("routes"))
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
        candidate["actors"] = self.picker.aliases()
        errors = document_errors(candidate)
        for parts, message in errors_under(errors, f"steps[{new_index}]"):
            if parts[:1] == ["branches"] or parts[:1] == ["position"]:
                continue
            head = parts[0] if parts else ""
            if head == "sources":
                self._add_source_error(parts[1:], message)
                continue
            if head in (*LLM_TOOL_FIELDS, *TOOL_STEP_FIELDS):
                self._add_tool_error(parts, message)
                continue
            if head in HTTP_FIELDS:
                where = ".".join(parts)
                self.add_error(None, f"{where}: {message}")
                if self.http_posted:
                    self.http.add_error(head, message)
                continue
            if head == "validation" and len(parts) > 1:
                target = self.VALIDATION_PATHS.get(parts[1])
            else:
                target = self.FIELD_PATHS.get(head)
            nested = ("tree", "routes", "leaf_targets", "set", "output_schema", "detect")
            detail = ".".join(parts[1:]) if head in nested else ""
            self.add_error(target, f"{detail}: {message}" if detail else message)
        if not self.errors:
            self.result = step
        return data

    def _add_source_error(self, parts: list[str], message: str) -> None:
        """Show an engine error about `sources[i].field` on that row (and above the form)."""
        index = int(parts[0]) if parts and parts[0].isdigit() else None
        field = parts[1] if len(parts) > 1 else None
        # The document's `sources[i]` is the i-th filled row: blank rows are not written.
        rows = self.sources.written_rows() if self.sources_posted else []
        if index is not None and index < len(rows) and field in rows[index].fields:
            rows[index].add_error(field, message)
            self.add_error(None, f"Source {self.sources.forms.index(rows[index]) + 1}: {message}")
        else:
            where = ".".join(parts)
            self.add_error(None, f"sources{'.' + where if where else ''}: {message}")

    def _add_tool_error(self, parts: list[str], message: str) -> None:
        """Show an engine error about a tools field on its field (and above the form)."""
        head = parts[0].partition("[")[0]
        where = ".".join(parts)
        self.add_error(None, f"{where}: {message}")
        if not self.tools.posted:
            return
        if head in LLM_TOOL_FIELDS:
            self.tools.llm.add_error(head, message)
        elif head == "tool":
            self.tools.step.add_error("tool", message)
        elif len(parts) > 1 and parts[1] in self.tools.arguments.fields:
            self.tools.arguments.add_error(parts[1], message)

    def _write_tools(self, step: dict[str, Any], kind: str) -> None:
        original = self.original
        for fields, field, section in (
            (LLM_TOOL_FIELDS, "tools", "llm"),
            (TOOL_STEP_FIELDS, "arguments", "tool"),
        ):
            if not self._takes(field, kind):
                continue
            if not self.tools.posted:
                step.update({k: original[k] for k in fields if k in original})
            elif section == "llm":
                self.tools.llm.write(step, original)
            else:
                step["tool"] = self.tools.step.cleaned_data["tool"]
                if arguments := self.tools.arguments.arguments():
                    step["arguments"] = arguments

    def _build_step(self, data: dict[str, Any]) -> dict[str, Any]:
        original = self.original
        step: dict[str, Any] = {
            k: v
            for k, v in original.items()
            if k
            not in (
                "branches",
                "position",
                *self.FIELD_PATHS,
                "validation",
                "sources",
                *LLM_TOOL_FIELDS,
                *TOOL_STEP_FIELDS,
                *HTTP_FIELDS,
            )
        }
        step.update({"key": data["key"], "name": data["name"], "kind": data["kind"]})
        actor = self.picker.resolve(data.get("actor") or "")
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
                validation["judge"] = self.picker.resolve(data["judge"])
            old = original.get("validation") if isinstance(original.get("validation"), dict) else {}
            if data.get("fallback") or "fallback" in old:
                validation["fallback"] = data["fallback"]
            step["validation"] = validation
        elif original.get("validation") is False:
            step["validation"] = False  # kept out of the recipe's `every_step`
        if self._takes_sources(data["kind"]):
            sources = self.sources.sources() if self.sources_posted else original.get("sources")
            if sources:
                step["sources"] = sources
        self._write_tools(step, data["kind"])
        if self._takes("url", data["kind"]):
            if self.http_posted:
                self.http.write(step)
            else:
                step.update({k: original[k] for k in HTTP_FIELDS if k in original})
        for name in KIND_FIELDS:
            if data["kind"] not in self.kind_only[name].split():
                continue
            value = data.get(name)
            if isinstance(self.fields[name], forms.BooleanField):
                # A switch is written when on, or kept (off) when the step had it.
                if value or name in original:
                    step[name] = bool(value)
            elif value is not None and value != {} and value != "":
                step[name] = self.picker.resolve(value) if name == "escalate_to" else value
        attempts = data.get("intent_max_attempts")
        if self._takes("intent_max_attempts", data["kind"]) and attempts is not None:
            step["max_attempts"] = attempts
        return step
