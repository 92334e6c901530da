"""Read structure out of free-form model answers: skip thinking, find embedded JSON."""

from __future__ import annotations

import json
import re

_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def strip_thinking(answer: str) -> str:
    """Remove `<think>...</think>` blocks, where reasoning models talk about other numbers."""
    return _THINKING.sub(" ", answer)


def json_objects(text: str) -> list[dict[str, object]]:
    """Return every JSON object embedded in `text`, as models wrap JSON in prose and fences."""
    decoder = json.JSONDecoder()
    found: list[dict[str, object]] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        position = text.find("{", end)
    return found


def shorten(text: str, limit: int = 40) -> str:
    """Return `text` cut to `limit` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


def unfence(text: str) -> tuple[str, bool]:
    """Return the body of a text that is one fenced block, and whether it was fenced."""
    found = _FENCE.match(text)
    return (found.group(1), True) if found else (text, False)


def json_object(text: str) -> dict[str, object] | None:
    """Return `text` parsed as a JSON object (bare or in one fenced block), or None."""
    body = unfence(text.strip())[0].strip()
    if not body.startswith("{"):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
