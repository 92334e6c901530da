"""Detect what kind of content a response is, by rules: json, code, numbers, list or prose."""

from __future__ import annotations

import json
import re

from workflows.engine.answers import unfence

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+\S")
_NUMBER_TOKEN = re.compile(r"[-+]?(?:\d[\d_]*)(?:[.,]\d+)*(?:[eE][-+]?\d+)?%?")
_DIGIT = re.compile(r"\d")
_NUMBER_SEPARATORS = re.compile(r"[\s,;|]+")
_CODE_LINE = re.compile(
    r"""^\s*(?:
        (?:def|class|import|from|return|function|const|let|var|public|private|static|
           \#include|package|using|fn|func|SELECT|INSERT|UPDATE|CREATE)\b
      | .*[;{}]\s*$
      | .*\)\s*:\s*$
      | [A-Za-z_][\w.\[\]]*\s*(?:[-+*/]?=|:=)\s*\S
      | (?://|\#!)
    )""",
    re.VERBOSE,
)
# A line alone is code if it ends with `;`, `{` or `}`, or starts like one of these. (Two
# checks, not one searched pattern: a search tries the anchored start at every position.)
_STRONG_CODE_START = re.compile(r"\s*(?:def|class|import|return|const|let|var|function|#include)\b")
_STRONG_CODE_ENDS = (";", "{", "}")
# Below this share of code-looking lines, a text with a stray `x = 1` is still prose.
_CODE_SHARE = 0.5
_LIST_SHARE = 0.6
_NUMBER_SHARE = 0.9


def _is_json(text: str) -> bool:
    if not text or text[0] not in "[{":
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # nesting deeper than Python's stack is not JSON here
        return False
    return True


def _is_numbers(text: str) -> bool:
    if _DIGIT.search(text) is None:  # most prose has no digit at all: answer without splitting
        return False
    tokens = [t for t in _NUMBER_SEPARATORS.split(text) if t]
    allowed = int(len(tokens) * (1 - _NUMBER_SHARE))
    misses = 0
    for token in tokens:
        if not _NUMBER_TOKEN.fullmatch(token.rstrip(".")):
            misses += 1
            if misses > allowed:
                return False
    return bool(tokens)


def detect_content_type(text: str) -> str:
    """Return the rule-based content type of `text`: json, code, numbers, list or prose.

    The first rule that holds wins: a JSON document (bare or in one fenced block); code (a
    fenced block, or mostly code-looking lines); numbers (almost every token a number); a list
    (mostly bullet or numbered lines); otherwise prose.
    """
    stripped = text.strip()
    body, fenced = unfence(stripped)
    if _is_json(body.strip()):
        return "json"
    if fenced or "```" in stripped:
        return "code"
    lines = [line for line in stripped.splitlines() if line.strip()]
    if not lines:
        return "prose"
    if _is_numbers(stripped):
        return "numbers"
    if _is_code(lines):
        return "code"
    if _is_list(lines):
        return "list"
    return "prose"


def _is_code(lines: list[str]) -> bool:
    if len(lines) == 1:
        # One line alone needs stronger evidence than a share: a sentence may hold `x = 1`.
        line = lines[0]
        return line.rstrip()[-1:] in _STRONG_CODE_ENDS or bool(_STRONG_CODE_START.match(line))
    code = sum(1 for line in lines if _CODE_LINE.match(line))
    return code / len(lines) >= _CODE_SHARE


def _is_list(lines: list[str]) -> bool:
    if len(lines) < 2:
        return False
    bullets = sum(1 for line in lines if _BULLET.match(line))
    return bullets / len(lines) >= _LIST_SHARE
