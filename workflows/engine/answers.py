"""Read structure out of free-form model answers: skip thinking, find embedded JSON."""

from __future__ import annotations

import json
import math
import re
from typing import Any

# Tags, not blocks: `<think>.*?</think>` searched an answer of many unclosed `<think>` once
# per tag to its end (200,000 characters took 22 s); pairing the tags is linear.
_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)


def strip_thinking(answer: str) -> str:
    """Remove `<think>...</think>` blocks, where reasoning models talk about other numbers.

    A block runs from a `<think>` to the first `</think>` after it; an unclosed one is kept.
    """
    kept: list[str] = []
    last = 0
    opened: int | None = None
    for tag in _THINK_TAG.finditer(answer):
        if tag.group(1) and opened is not None:
            kept += (answer[last:opened], " ")
            last, opened = tag.end(), None
        elif not tag.group(1) and opened is None:
            opened = tag.start()
    if not kept:
        return answer
    kept.append(answer[last:])
    return "".join(kept)


def strict_json(text: str) -> Any:
    """Read JSON as JSON has it; raise ValueError for NaN, Infinity and numbers past a
    float's range (Python's json reads them, and no JSON column can store them)."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of range")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Models write `NaN` where JSON has no number: such an object is not JSON, it is text.
_STRICT_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)

# Where json_objects looks: each failed attempt costs up to the text's length (the decoder
# counts lines for its error, or recurses into deep nesting), so a long answer full of `{`
# took seconds (200,000 characters: 7 s). A verdict's JSON comes early; 20,000: under 0.2 s.
MAX_JSON_SCAN_CHARS = 20_000


def json_objects(text: str) -> list[dict[str, object]]:
    """Return every JSON object embedded in `text`, as models wrap JSON in prose and fences.

    Only objects within the first `MAX_JSON_SCAN_CHARS` characters are found; one holding
    `NaN` or `Infinity` is not JSON and is skipped.
    """
    decoder = _STRICT_DECODER
    text = text[:MAX_JSON_SCAN_CHARS]
    found: list[dict[str, object]] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):  # too deeply nested to be an answer's JSON
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        position = text.find("{", end)
    return found


_APOSTROPHE = "['\u2019]"  # models write both the straight and the curly apostrophe
_REFUSAL = re.compile(
    rf"\b(?:i{_APOSTROPHE}?m sorry|i am sorry|i apologi[sz]e|my apologies|"
    rf"i can(?:not|{_APOSTROPHE}t)|i{_APOSTROPHE}?m (?:unable|not able)|"
    rf"i am (?:unable|not able)|i won{_APOSTROPHE}?t be able|as an ai\b)",
    re.IGNORECASE,
)


def is_refusal(text: str) -> bool:
    """Tell whether `text` refuses or apologises ("I'm sorry", "I cannot", "As an AI")."""
    return _REFUSAL.search(text) is not None


def shorten(text: str, limit: int = 40) -> str:
    """Return `text` cut to `limit` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


def unfence(text: str) -> tuple[str, bool]:
    """Return the body of a text that is one fenced block, and whether it was fenced."""
    found = _FENCE.match(text)
    return (found.group(1), True) if found else (text, False)


# An answer that opens with a fenced block: its body, whatever follows the block.
_LEADING_FENCE = re.compile(r"\A```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?```", re.DOTALL)


def json_object(text: str) -> dict[str, object] | None:
    """Return the JSON object `text` opens with (bare or in a fenced block), or None.

    What follows the object is commentary and is ignored ("{...} Hope this helps!"); an
    object holding `NaN` or `Infinity` is not JSON (no JSON column can store it): None.
    """
    body = text.strip()
    fenced = _LEADING_FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith("{"):
        return None
    try:
        value, _ = _STRICT_DECODER.raw_decode(body)
    except (ValueError, RecursionError):  # too deeply nested to be an answer's JSON
        return None
    return value if isinstance(value, dict) else None
