"""The step panel's tools: the MCP tools an llm step may call, and a tool step's call.

An llm step's Tools section (`ToolsForm`, prefix `tools`) picks tools from those discovered on
the registered servers, with `max_tool_calls` and `max_tool_seconds`. A tool step's section
(`ToolStepForm`, prefix `tool`) picks one tool; its arguments form (`ArgumentsForm`, prefix
`args`) has one field per property of the tool's input schema, each a template the run fills
in and types. The engine checks the names and templates when the step is applied; whether a
tool exists, and what its arguments must be, only the discovered list can tell, so that is
checked here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from tools.client import ToolSpec
from tools.registry import argument_problems, coerce_arguments
from tools.selectors import discovered_tools
from workflows.engine.errors import TemplateError
from workflows.engine.templating import template_names
from workflows.engine.tools import (
    DEFAULT_MAX_TOOL_CALLS,
    DEFAULT_MAX_TOOL_SECONDS,
    MAX_MAX_TOOL_CALLS,
    MAX_MAX_TOOL_SECONDS,
    MAX_TOOLS,
)

from .fields import normalise_newlines

TOOLS_PREFIX = "tools"
TOOL_PREFIX = "tool"
ARGS_PREFIX = "args"
# Posted by both sections: a post without it (an older page, a script) keeps the step's tools.
POSTED = "tools-posted"
JSON_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null")


@dataclass(frozen=True)
class ToolEntry:
    """One discovered tool as the editor offers it."""

    name: str  # SERVER.TOOL
    description: str
    input_schema: dict[str, Any]
    server: str

    @property
    def schema_text(self) -> str:
        return json.dumps(self.input_schema, ensure_ascii=False, indent=2)

    @property
    def arguments(self) -> list[ArgumentSpec]:
        return argument_specs(self.input_schema)


@dataclass(frozen=True)
class ArgumentSpec:
    """One property of a tool's input schema, as its field in the arguments form."""

    name: str
    type: str  # a JSON type, or "any"
    required: bool
    description: str = ""
    enum: tuple[Any, ...] = ()
    default: Any = None
    schema: dict[str, Any] = field(default_factory=dict)


def tool_catalog() -> dict[str, ToolEntry]:
    """Return the tools discovered on the enabled servers, by name SERVER.TOOL."""
    entries: dict[str, ToolEntry] = {}
    for item in discovered_tools():
        schema = item.input_schema if isinstance(item.input_schema, dict) else {}
        entries[item.name] = ToolEntry(
            name=item.name,
            description=item.description or "",
            input_schema=schema,
            server=item.server,
        )
    return entries


def _type_of(schema: dict[str, Any]) -> str:
    """Return the JSON type a property takes (the first that is not null), or "any"."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if isinstance(k, str) and k != "null"]
        kind = kinds[0] if kinds else None
    if kind is None:
        # Pydantic writes `Optional[int]` as anyOf [{type: integer}, {type: null}].
        for option in schema.get("anyOf") or schema.get("oneOf") or []:
            if isinstance(option, dict) and option.get("type") not in (None, "null"):
                return _type_of(option)
    return kind if isinstance(kind, str) and kind in JSON_TYPES else "any"


def argument_specs(schema: Any) -> list[ArgumentSpec]:
    """Return a field per property of an input schema: required first, then in schema order."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    specs = []
    for name, prop in schema["properties"].items():
        prop = prop if isinstance(prop, dict) else {}
        # Not the title: generated schemas title `a` "A", which says nothing more.
        description = prop.get("description") or ""
        enum = prop.get("enum") if isinstance(prop.get("enum"), list) else []
        specs.append(
            ArgumentSpec(
                name=str(name),
                type=_type_of(prop),
                required=name in required,
                description=str(description),
                enum=tuple(enum),
                default=prop.get("default"),
                schema=prop,
            )
        )
    return sorted(specs, key=lambda s: not s.required)


def _is_template(text: str) -> bool:
    """Tell whether a run fills `text` in (it names something, or is not a valid template)."""
    try:
        return bool(template_names(text))
    except TemplateError:
        return True


def literal_problems(entry: ToolEntry, literals: dict[str, str]) -> dict[str, list[str]]:
    """Return, per argument, why values with no template names break the tool's schema.

    They are typed as a run types the rendered text ("3" becomes 3 for a number) and checked
    against the schema; a value that names something is only known when the run fills it in.
    """
    spec = ToolSpec(name=entry.name, description=entry.description, input_schema=entry.input_schema)
    problems: dict[str, list[str]] = {}
    for problem in argument_problems(spec, coerce_arguments(spec, literals)):
        path, _, message = problem.partition(": ")
        name = path.split(".")[0]
        # `$` problems (required, extra properties) are the fields' own to say.
        if name in literals:
            problems.setdefault(name, []).append(_sentence(message))
    return problems


def _sentence(message: str) -> str:
    return f"{message[:1].upper()}{message[1:]}." if message else message


def _with_missing(entries: dict[str, ToolEntry], named: list[str]) -> list[tuple[str, str]]:
    choices = [(name, name) for name in entries]
    # Kept as choices so the panel shows them; the form refuses them with a clear message.
    choices += [(n, f"{n} (not found)") for n in named if n not in entries]
    return choices


def unknown_tool_message(name: str) -> str:
    server = name.partition(".")[0]
    return (
        f"No tool {name} is known: no enabled tool server {server} lists it. Register the "
        "server or discover its tools again (staff), or choose another tool."
    )


class ToolsForm(forms.Form):
    """An llm step's Tools section."""

    tools = forms.MultipleChoiceField(
        choices=(), required=False, widget=forms.CheckboxSelectMultiple
    )
    max_tool_calls = forms.IntegerField(
        min_value=1,
        max_value=MAX_MAX_TOOL_CALLS,
        required=False,
        initial=DEFAULT_MAX_TOOL_CALLS,
        label="Max tool calls",
        help_text=f"1 to {MAX_MAX_TOOL_CALLS}; then the model answers without tools.",
    )
    max_tool_seconds = forms.IntegerField(
        min_value=1,
        max_value=MAX_MAX_TOOL_SECONDS,
        required=False,
        initial=DEFAULT_MAX_TOOL_SECONDS,
        label="Max tool time (seconds)",
        help_text="For the model and all its tool calls together.",
    )

    def __init__(
        self, *args: Any, catalog: dict[str, ToolEntry], named: list[str], **kw: Any
    ) -> None:
        kw.setdefault("prefix", TOOLS_PREFIX)
        super().__init__(*args, **kw)
        self.catalog = catalog
        self.named = named
        self.fields["tools"].choices = _with_missing(catalog, named)

    def clean_tools(self) -> list[str]:
        chosen: list[str] = list(self.cleaned_data["tools"])
        unknown = [n for n in chosen if n not in self.catalog]
        if unknown:
            raise ValidationError(" ".join(unknown_tool_message(n) for n in unknown))
        if len(chosen) > MAX_TOOLS:
            raise ValidationError(f"Choose at most {MAX_TOOLS} tools.")
        return chosen

    def entries(self) -> list[dict[str, Any]]:
        """Return the tools to list: each discovered one and each named one that is missing."""
        chosen = set(self["tools"].value() or [])
        rows = [
            {"entry": e, "checked": e.name in chosen, "missing": False}
            for e in self.catalog.values()
        ]
        rows += [
            {"entry": None, "name": n, "checked": n in chosen, "missing": True}
            for n in self.named
            if n not in self.catalog
        ]
        return rows

    def write(self, step: dict[str, Any], original: dict[str, Any]) -> None:
        """Write the section's fields on `step` (nothing when no tool is chosen)."""
        data = self.cleaned_data
        if not data["tools"]:
            return
        step["tools"] = data["tools"]
        for name, default in (
            ("max_tool_calls", DEFAULT_MAX_TOOL_CALLS),
            ("max_tool_seconds", DEFAULT_MAX_TOOL_SECONDS),
        ):
            value = data.get(name)
            # A default is written only where the step had the field: documents stay short.
            if value is not None and (value != default or name in original):
                step[name] = value


class ToolStepForm(forms.Form):
    """A tool step's tool."""

    tool = forms.ChoiceField(choices=(), required=False, label="Tool")

    def __init__(self, *args: Any, catalog: dict[str, ToolEntry], named: str, **kw: Any) -> None:
        kw.setdefault("prefix", TOOL_PREFIX)
        super().__init__(*args, **kw)
        self.catalog = catalog
        choices = [("", "— choose a tool"), *_with_missing(catalog, [named] if named else [])]
        self.fields["tool"].choices = choices
        self.fields["tool"].widget.attrs["data-tool-picker"] = ""

    def clean_tool(self) -> str:
        name: str = self.cleaned_data["tool"]
        if not name:
            raise ValidationError("Choose the tool to call.")
        if name not in self.catalog:
            raise ValidationError(unknown_tool_message(name))
        return name

    @property
    def entry(self) -> ToolEntry | None:
        value = self["tool"].value()
        return self.catalog.get(value) if isinstance(value, str) else None


class ArgumentsForm(forms.Form):
    """A tool step's arguments: one template field per property of the tool's input schema."""

    def __init__(
        self, data: Any = None, *, entry: ToolEntry | None, initial: dict[str, Any] | None = None
    ) -> None:
        super().__init__(data, prefix=ARGS_PREFIX, initial=initial or {})
        self.entry = entry
        self.specs = {s.name: s for s in (entry.arguments if entry else [])}
        for spec in self.specs.values():
            kind = spec.type if spec.type != "any" else "any JSON"
            label = f"{spec.name} ({kind}{', required' if spec.required else ''})"
            widget: forms.Widget
            if spec.type in ("object", "array") or (spec.type == "string" and not spec.enum):
                widget = forms.Textarea(attrs={"rows": 2, "spellcheck": "false"})
            else:
                widget = forms.TextInput(attrs={"spellcheck": "false"})
            help_text = spec.description
            if spec.enum:
                help_text = f"{help_text} One of: {', '.join(str(e) for e in spec.enum)}.".strip()
            if spec.default is not None and not spec.required:
                help_text = f"{help_text} Empty: the tool's default ({spec.default}).".strip()
            self.fields[spec.name] = forms.CharField(
                required=spec.required,
                strip=False,
                label=label,
                help_text=help_text,
                widget=widget,
                error_messages={"required": f"The tool needs {spec.name}: write a value."},
            )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        literals: dict[str, str] = {}
        for name in self.specs:
            value = data.get(name)
            if not isinstance(value, str):
                continue
            value = data[name] = normalise_newlines(value)
            if value.strip() and not _is_template(value):
                literals[name] = value
        if self.entry is not None and literals:
            for name, messages in literal_problems(self.entry, literals).items():
                for message in messages:
                    self.add_error(name, message)
        return data

    def arguments(self) -> dict[str, str]:
        """Return the arguments as the step holds them: a template per filled field."""
        return {
            name: value
            for name in self.specs
            if isinstance(value := self.cleaned_data.get(name), str) and value.strip()
        }


def argument_initial(arguments: Any) -> dict[str, str]:
    """Return a step's arguments as the fields' initial values (what is odd kept as text)."""
    if not isinstance(arguments, dict):
        return {}
    return {
        str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        for k, v in arguments.items()
    }


class ToolSections:
    """Both tools sections of one step panel, bound to a post or filled from the step."""

    def __init__(self, data: Any, *, step: dict[str, Any]) -> None:
        self.posted = data is not None and POSTED in data
        bound = data if self.posted else None
        self.catalog = tool_catalog()
        named = step.get("tools") if isinstance(step.get("tools"), list) else []
        named = [n for n in named if isinstance(n, str)]
        initial = {
            "tools": named,
            "max_tool_calls": step.get("max_tool_calls", DEFAULT_MAX_TOOL_CALLS),
            "max_tool_seconds": step.get("max_tool_seconds", DEFAULT_MAX_TOOL_SECONDS),
        }
        self.llm = ToolsForm(bound, catalog=self.catalog, named=named, initial=initial)
        tool = step.get("tool") if isinstance(step.get("tool"), str) else ""
        self.step = ToolStepForm(bound, catalog=self.catalog, named=tool, initial={"tool": tool})
        self.arguments = ArgumentsForm(
            bound, entry=self.step.entry, initial=argument_initial(step.get("arguments"))
        )
        self.unlisted = sorted(
            set(argument_initial(step.get("arguments"))) - set(self.arguments.specs)
        )

    def llm_valid(self) -> bool:
        return self.llm.is_valid()

    def tool_valid(self) -> bool:
        # Both run, so that every mistake shows at once.
        step_ok = self.step.is_valid()
        return self.arguments.is_valid() and step_ok
