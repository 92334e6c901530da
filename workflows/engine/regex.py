"""Compile user regexes with RE2, within bounds that keep every match fast.

User patterns are untrusted input: Python's `re` backtracks, so `^(a+)+$` can hang a worker.
RE2 refuses the features that need backtracking (backreferences, lookaround) instead, and
matches in time linear in the text, but the factor is the size of the compiled program: when
RE2's DFA gives up on a pattern (too many states), its NFA costs about 2-4 ns per program
instruction per character. A 100,000-character pattern against a 100 KB answer took 29 s. So
every user pattern (branch conditions, scripted actors' rules) is compiled here, and bounded:

- `MAX_PATTERN_CHARS`: the pattern's length, refused beyond (real patterns are tens of
  characters; the longest in the demo recipes is about 100);
- `MAX_PROGRAM_SIZE`: RE2 instructions once compiled, which length alone does not bound
  (`(.*a){999}` is 10 characters and 11,000 instructions; `.{0,200}` is about 1,800);
- `RE2_MAX_MEM`: RE2's memory budget per pattern (program and DFA cache); the DFA still has
  room for ordinary patterns (with 256 KiB, `[^\\n]{0,100}$` on 100,000 characters took 70 ms
  instead of 0.1 ms);
- `MAX_TEXT_CHARS`: the characters of a text a pattern reads (the rest is not searched).

Worst case measured on a 2-core machine: a 2,500-instruction pattern that defeats the DFA,
against 100,000 characters (ASCII or 4-byte), matched in 0.4-0.9 s.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import re2  # type: ignore[import-untyped]

from workflows.engine.errors import RegexError, RegexTooLarge

FLAG_LETTERS = frozenset("ims")
MAX_PATTERN_CHARS = 2000
MAX_PROGRAM_SIZE = 2500
RE2_MAX_MEM = 1 << 20
MAX_TEXT_CHARS = 100_000

# Compiled automatons are kept per (pattern, flags): recipes reuse the same few patterns.
_CACHE_SIZE = 512


@dataclass(frozen=True, slots=True)
class Match:
    """Where a pattern matched: the matched text and its character offset."""

    text: str
    start: int


# The wrapper's `search` re-encodes the text and builds a generator and a match object per
# call (about 3 µs); the RE2 object underneath answers in about 0.5 µs. Branch evaluation
# calls several patterns on one response, so it encodes once and asks RE2 directly, falling
# back to the public API if a future wrapper hides these names.
_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)


def bounded(text: str) -> str:
    """Return the part of `text` a pattern reads: its first `MAX_TEXT_CHARS` characters."""
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS]


def encode(text: str) -> bytes:
    """Return `text` as the UTF-8 bytes `Pattern.search_encoded` takes."""
    # surrogatepass: a lone surrogate (from odd JSON) must not crash the evaluation.
    return text.encode("utf-8", "surrogatepass")


class Pattern:
    """A compiled RE2 pattern with a typed `search`."""

    __slots__ = ("_raw", "_regexp", "flags", "source")

    def __init__(self, source: str, flags: str, regexp: Any) -> None:
        self.source = source
        self.flags = flags
        self._regexp = regexp
        raw = getattr(regexp, "_regexp", None)
        self._raw = raw if _UNANCHORED is not None and hasattr(raw, "Match") else None

    def search(self, text: str) -> Match | None:
        """Return the first match in the first `MAX_TEXT_CHARS` characters of `text`, or None."""
        text = bounded(text)
        return self.search_encoded(encode(text), text)

    def search_encoded(self, data: bytes, text: str) -> Match | None:
        """Return the first match in `text`, given also as its UTF-8 bytes `data`.

        The caller bounds `text` (see `bounded`), and says so when it cut it.
        """
        if self._raw is None:
            found = self._regexp.search(text)
            return None if found is None else Match(found.group(0), found.start(0))
        start, end = self._raw.Match(_UNANCHORED, data, 0, len(data))[0]
        if start < 0:
            return None
        matched = data[start:end].decode("utf-8", "surrogatepass")
        return Match(matched, len(data[:start].decode("utf-8", "surrogatepass")))

    def __repr__(self) -> str:
        return f"Pattern({self.source!r}, flags={self.flags!r})"


def check_flags(flags: str) -> str | None:
    """Return why `flags` is not a set of the letters i, m, s, or None when it is."""
    unknown = sorted(set(flags) - FLAG_LETTERS)
    if unknown:
        return f"unknown regex flag {', '.join(repr(u) for u in unknown)}; use i, m or s"
    return None


@functools.lru_cache(maxsize=_CACHE_SIZE)
def compile_pattern(source: str, flags: str = "") -> Pattern:
    """Compile `source` with the inline `flags` (i, m, s).

    Raise RegexTooLarge beyond the bounds of this module, RegexError if RE2 refuses it.
    """
    problem = check_flags(flags)
    if problem:
        raise RegexError(problem)
    if len(source) > MAX_PATTERN_CHARS:
        raise RegexTooLarge(f"pattern is {len(source)} characters, at most {MAX_PATTERN_CHARS}")
    options = re2.Options()
    # RE2 logs every refused pattern to stderr; the refusal is reported to the author instead.
    options.log_errors = False
    options.max_mem = RE2_MAX_MEM
    prefix = f"(?{''.join(sorted(set(flags)))})" if flags else ""
    try:
        regexp = re2.compile(prefix + source, options)
    except re2.error as exc:
        if _detail(exc) == "pattern too large - compile failed":
            budget = f"beyond RE2's memory budget of {RE2_MAX_MEM // 1024} KiB"
            raise RegexTooLarge(_too_large(budget)) from None
        raise RegexError(_explain(exc)) from None
    size = regexp.programsize
    if size > MAX_PROGRAM_SIZE:
        raise RegexTooLarge(_too_large(f"{size} RE2 instructions, at most {MAX_PROGRAM_SIZE}"))
    return Pattern(source, flags, regexp)


def _too_large(compiled: str) -> str:
    return (
        f"pattern is too large once compiled ({compiled}); "
        "counted repetitions such as {0,500} multiply it: prefer * or +"
    )


def _detail(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else ""
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _explain(exc: Exception) -> str:
    detail = _detail(exc)
    if detail.startswith("invalid escape sequence: \\") and detail[-1:].isdigit():
        return f"backreferences and lookaround are not supported ({detail})"
    if detail == "invalid escape sequence: \\k":
        return f"backreferences and lookaround are not supported ({detail})"
    if detail.startswith("invalid perl operator: (?") and detail[-1:] in ("=", "!", "P"):
        return f"backreferences and lookaround are not supported ({detail})"
    if detail == "invalid escape sequence: \\Z":
        return f"use \\z for the end of text ({detail})"
    return detail or "the pattern does not compile"
