"""A recipe's inbound webhooks: `webhooks: [{"name", "secret_env", "inputs"}]`.

Each hook is an address, `POST /api/hooks/{slug}/{name}`, that starts a run of the latest
published version when another system posts to it a request signed by the Standard Webhooks
scheme with the secret held in the environment variable `secret_env` (never in the recipe).

`inputs` maps each recipe input to a JMESPath expression over the posted JSON payload
(`{"topic": "issue.title"}`); an expression that finds nothing (null) leaves its input out,
so its default applies, or its absence is reported when it is required. Without `inputs`, the
payload itself is the run's inputs: a JSON object whose fields are the recipe's inputs.

Expressions are compiled when the recipe is checked, so a publish refuses one that does not
parse or that calls a function JMESPath does not have, at `webhooks[i].inputs.NAME`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jmespath import functions as jmespath_functions  # type: ignore[import-untyped]
from jmespath.exceptions import JMESPathError  # type: ignore[import-untyped]

from workflows.engine import expressions
from workflows.engine.secrets import secret_env_problem

# A hook's name is the last segment of its address.
HOOK_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
MAX_NAME_LENGTH = 100
MAX_HOOKS = 20
MAX_EXPRESSION_LENGTH = 1000
FIELD_NAMES = ("name", "secret_env", "inputs")
_FUNCTIONS: Mapping[str, Mapping[str, Any]] = jmespath_functions.Functions().FUNCTION_TABLE


@dataclass(frozen=True, slots=True)
class WebhookSpec:
    """One inbound webhook: its name, the env var holding its secret(s), and how its payload
    becomes the run's inputs (input name -> JMESPath expression; None: the payload itself)."""

    name: str
    secret_env: str
    inputs: Mapping[str, str] | None = None
    _compiled: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def as_json(self) -> dict[str, Any]:
        """Return the hook as a recipe document writes it."""
        doc: dict[str, Any] = {"name": self.name, "secret_env": self.secret_env}
        if self.inputs is not None:
            doc["inputs"] = dict(self.inputs)
        return doc


class PayloadUnmapped(Exception):
    """The payload does not give the inputs; `errors` lists every `inputs.NAME: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def map_payload(hook: WebhookSpec, payload: object) -> dict[str, Any]:
    """Return the run inputs that `hook` reads from `payload` (parsed JSON).

    Raise PayloadUnmapped naming each input whose expression failed (e.g. a function given
    the wrong type), or saying why a payload taken whole is not an inputs object.
    """
    if hook.inputs is None:
        if not isinstance(payload, Mapping):
            raise PayloadUnmapped(
                [
                    f"$: the payload must be a JSON object of the recipe's inputs (or the hook "
                    f"maps its fields with `inputs`), got {_json_type(payload)}"
                ]
            )
        return dict(payload)
    inputs: dict[str, Any] = {}
    errors = []
    for name, expression in hook._compiled.items():
        try:
            value = expressions.search(expression, payload)
        except JMESPathError as exc:
            errors.append(f"inputs.{name}: {hook.inputs[name]!r} failed on the payload: {exc}")
            continue
        if value is not None:
            inputs[name] = value
    if errors:
        raise PayloadUnmapped(errors)
    return inputs


def parse_webhooks(
    value: object, error: Callable[[str, str], None], input_names: set[str]
) -> tuple[WebhookSpec, ...]:
    """Read a recipe's `webhooks`; report each problem through `error(path, message)`."""
    if value is None:
        return ()
    if not isinstance(value, list):
        error("webhooks", f"must be a list of hooks, got {_json_type(value)}")
        return ()
    if len(value) > MAX_HOOKS:
        error("webhooks", f"a recipe has at most {MAX_HOOKS} webhooks, got {len(value)}")
        return ()
    hooks: list[WebhookSpec] = []
    seen: dict[str, int] = {}
    for i, doc in enumerate(value):
        path = f"webhooks[{i}]"
        hook = _hook(doc, path, error, input_names)
        if hook is None:
            continue
        if hook.name in seen:
            error(
                f"{path}.name",
                f"duplicate hook name '{hook.name}' (also webhooks[{seen[hook.name]}])",
            )
            continue
        seen[hook.name] = i
        hooks.append(hook)
    return tuple(hooks)


def _hook(
    doc: object, path: str, error: Callable[[str, str], None], input_names: set[str]
) -> WebhookSpec | None:
    if not isinstance(doc, Mapping):
        error(path, f"must be an object, got {_json_type(doc)}")
        return None
    ok = True
    for key in doc:
        if key not in FIELD_NAMES:
            error(f"{path}.{key}", f"unknown field; expected one of: {', '.join(FIELD_NAMES)}")
            ok = False
    name = doc.get("name")
    if not isinstance(name, str) or not HOOK_NAME.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        error(
            f"{path}.name",
            f"must be up to {MAX_NAME_LENGTH} of a-z, 0-9, - and _ (it ends the hook's "
            f"address), starting with a letter or digit, got {name!r}",
        )
        ok = False
    secret_env = doc.get("secret_env")
    if problem := secret_env_problem(secret_env):
        # Not echoed: a secret pasted here by mistake must not show up in the error.
        error(f"{path}.secret_env", problem)
        ok = False
    inputs, compiled, inputs_ok = _inputs(doc.get("inputs"), f"{path}.inputs", error, input_names)
    if not (ok and inputs_ok) or not isinstance(name, str) or not isinstance(secret_env, str):
        return None
    return WebhookSpec(name=name, secret_env=secret_env, inputs=inputs, _compiled=compiled)


def _inputs(
    value: object, path: str, error: Callable[[str, str], None], input_names: set[str]
) -> tuple[dict[str, str] | None, dict[str, Any], bool]:
    """Return the mapping (None: the payload is the inputs), its compiled expressions, and
    whether it was read without errors."""
    if value is None:
        return None, {}, True
    if not isinstance(value, Mapping):
        error(
            path, f"must be an object of input name: JMESPath expression, got {_json_type(value)}"
        )
        return None, {}, False
    inputs: dict[str, str] = {}
    compiled: dict[str, Any] = {}
    ok = True
    for name, expression in value.items():
        at = f"{path}.{name}"
        if name not in input_names:
            error(
                at,
                f"not an input of the recipe; declared: {', '.join(sorted(input_names)) or 'none'}",
            )
            ok = False
            continue
        if not isinstance(expression, str) or not expression.strip():
            error(at, f"must be a JMESPath expression (text), got {expression!r}")
            ok = False
            continue
        if len(expression) > MAX_EXPRESSION_LENGTH:
            error(at, f"an expression is at most {MAX_EXPRESSION_LENGTH} characters")
            ok = False
            continue
        try:
            parsed = expressions.compile(expression)
        except JMESPathError as exc:
            error(at, f"not a JMESPath expression: {_one_line(exc)}")
            ok = False
            continue
        if problem := _function_problem(parsed.parsed):
            error(at, problem)
            ok = False
            continue
        inputs[str(name)] = expression
        compiled[str(name)] = parsed
    return inputs, compiled, ok


def _function_problem(node: Mapping[str, Any]) -> str | None:
    """Return why a function the expression calls cannot be called (JMESPath finds out only
    when it evaluates the call), or None."""
    if node.get("type") == "function_expression":
        name, count = node["value"], len(node["children"])
        spec = _FUNCTIONS.get(name)
        if spec is None:
            return f"unknown function {name}(); JMESPath has {', '.join(sorted(_FUNCTIONS))}"
        signature = spec["signature"]
        variadic = bool(signature) and bool(signature[-1].get("variadic"))
        if count < len(signature) or (not variadic and count > len(signature)):
            wanted = f"{'at least ' if variadic else ''}{len(signature)}"
            return (
                f"{name}() takes {wanted} argument{'s' if len(signature) != 1 else ''}, got {count}"
            )
    for child in node.get("children", ()):
        if isinstance(child, Mapping) and (problem := _function_problem(child)):
            return problem
    return None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
