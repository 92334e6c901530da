"""Read a recipe file (JSON, or YAML) and check its structure, collecting every error."""

from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import ValidationError

from .schema import RecipeDocument


class _NoAliasLoader(yaml.SafeLoader):
    """Read YAML without aliases: a few `*name`s can expand a small file a billion-fold."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not accepted in recipe files", event.start_mark
            )
        return super().compose_node(parent, index)  # type: ignore[no-any-return]


class DocumentError(Exception):
    """A recipe document that cannot be accepted; `errors` lists every `path: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _unreadable(exc: ValueError | RecursionError) -> str:
    """Say why a parser gave up with a Python error rather than a syntax error."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if "integer string conversion" in str(exc):
        return "a number has more than 4300 digits"
    return str(exc)


def load_document(data: str | bytes, *, max_bytes: int) -> dict[str, Any]:
    """Parse recipe text as JSON, falling back to YAML; raise DocumentError if it is neither."""
    if len(data) > max_bytes:
        raise DocumentError([f"$: the file is {len(data)} bytes; the limit is {max_bytes}"])
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError([f"$: the file is not UTF-8 text ({exc.reason})"]) from None
    text = data.strip()
    if not text:
        raise DocumentError(["$: the file is empty"])
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DocumentError(
                [f"$: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"]
            ) from None
        except (ValueError, RecursionError) as exc:
            raise DocumentError([f"$: invalid JSON: {_unreadable(exc)}"]) from None
    else:
        try:
            doc = yaml.load(text, Loader=_NoAliasLoader)  # a SafeLoader without aliases
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or "unreadable"
            raise DocumentError([f"$: invalid YAML{where}: {problem}"]) from None
        except (ValueError, RecursionError) as exc:
            # Tagged values that do not convert (`2024-13-45` as a date, `!!int 0x`).
            raise DocumentError([f"$: invalid YAML: {_unreadable(exc)}"]) from None
    if not isinstance(doc, dict):
        raise DocumentError(["$: a recipe is a JSON object (a mapping)"])
    return doc


def document_size_errors(doc: dict[str, Any], *, max_bytes: int) -> list[str]:
    """Return an error if `doc`, written as JSON, is over `max_bytes` (a parsed API body)."""
    try:
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    except (RecursionError, TypeError, ValueError):
        return []  # not plain JSON: validators.json_value_errors says why
    # surrogatepass: a lone surrogate is reported with its path by json_value_errors, not here.
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return [f"$: the document is {size} bytes as JSON; the limit is {max_bytes}"]
    return []


def format_path(loc: tuple[int | str, ...]) -> str:
    """Turn a pydantic location into a `steps[2].branches[0].when` path."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "$"


def structure_errors(doc: dict[str, Any]) -> list[str]:
    """Return every structural error of a recipe document as `path: message`."""
    try:
        RecipeDocument.model_validate(doc)
    except ValidationError as exc:
        errors = []
        for err in exc.errors(include_url=False):
            loc = tuple(
                p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))
            )
            message = err["msg"]
            if err["type"] == "extra_forbidden":
                message = "unknown field"
            elif err["type"] == "literal_error" and loc == ("format",):
                message = "must be 'branchline.recipe/v1'"
            errors.append(f"{format_path(loc)}: {message}")
        return errors
    return []
