from __future__ import annotations

import time

import pytest
import re2  # type: ignore[import-untyped]

from workflows.engine import RegexError, RegexTooLarge, compile_pattern
from workflows.engine.regex import MAX_PATTERN_CHARS, MAX_PROGRAM_SIZE, MAX_TEXT_CHARS


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (
            r"(a)\1",
            "backreferences and lookaround are not supported (invalid escape sequence: \\1)",
        ),
        (
            r"(?P<x>a)(?P=x)",
            "backreferences and lookaround are not supported (invalid perl operator: (?P)",
        ),
        (r"a(?=b)", "backreferences and lookaround are not supported (invalid perl operator: (?=)"),
        (
            r"(?<!a)b",
            "backreferences and lookaround are not supported (invalid perl operator: (?<!)",
        ),
        (r"end\Z", "use \\z for the end of text (invalid escape sequence: \\Z)"),
        ("(", "missing ): ("),
        ("a{2000000}", "invalid repetition size: {2000000}"),
    ],
)
def test_it_refuses_a_regex_that_does_not_compile_and_says_why(pattern: str, message: str) -> None:
    with pytest.raises(RegexError) as raised:
        compile_pattern(pattern)
    assert str(raised.value) == message


def test_it_refuses_unknown_flags() -> None:
    with pytest.raises(RegexError, match="unknown regex flag 'g', 'x'; use i, m or s"):
        compile_pattern("a", "gix")


def test_it_matches_a_catastrophic_pattern_in_well_under_100_ms() -> None:
    pattern = compile_pattern("^(a+)+$")
    began = time.perf_counter()
    assert pattern.search("a" * 40 + "!") is None
    assert pattern.search("a" * 99_999 + "!") is None
    assert time.perf_counter() - began < 0.1


def test_it_reports_character_offsets_in_non_ascii_text() -> None:
    found = compile_pattern("dragón", "i").search("¡Un DRAGÓN!")
    assert found is not None and (found.text, found.start) == ("DRAGÓN", 4)


def test_it_caches_compiled_patterns() -> None:
    assert compile_pattern("cache-me", "i") is compile_pattern("cache-me", "i")


class TestBounds:
    """Every user pattern is bounded (regex.py): its length, its compiled size, the text read."""

    @pytest.mark.parametrize(
        ("pattern", "message"),
        [
            ("a" * (MAX_PATTERN_CHARS + 1), "pattern is 2001 characters, at most 2000"),
            ("x" * 100_000, "pattern is 100000 characters, at most 2000"),
            # Short patterns that compile to large programs: length alone is no bound.
            (r"(.*a){999}", "pattern is too large once compiled (10993 RE2 instructions"),
            (r"[^\n]{0,500}", "pattern is too large once compiled (4504 RE2 instructions"),
            ("漢" * 1000, "pattern is too large once compiled (3004 RE2 instructions"),
            (r"\pL{1,100}", "pattern is too large once compiled (beyond RE2's memory budget"),
            (r"\pL{1,100}" * 20, "pattern is too large once compiled (beyond RE2's memory budget"),
        ],
    )
    def test_it_refuses_a_pattern_beyond_the_bounds(self, pattern: str, message: str) -> None:
        with pytest.raises(RegexTooLarge) as raised:
            compile_pattern(pattern)
        assert str(raised.value).startswith(message)

    @pytest.mark.parametrize(
        "pattern",
        [
            "a" * MAX_PATTERN_CHARS,
            "é" * 1000,
            r".{0,200}",
            r"(?i)(violence|inappropriate)",
            r"\w{1,100}",
        ],
    )
    def test_it_accepts_patterns_within_the_bounds(self, pattern: str) -> None:
        assert compile_pattern(pattern).source == pattern

    def test_the_worst_allowed_pattern_on_the_largest_text_read_finds_the_right_match(
        self,
    ) -> None:
        # `a[ab]{n}c` defeats RE2's DFA on a text of a and b (one state per window of n):
        # the NFA then steps through every instruction for every character, the slowest path.
        n = MAX_PROGRAM_SIZE - (_size(_window(1)) - 1)  # one instruction per repetition
        assert _size(_window(n)) == MAX_PROGRAM_SIZE
        pattern = compile_pattern(_window(n))
        noise = "".join("ab"[(i * 7919) % 3 % 2] for i in range(MAX_TEXT_CHARS - n - 2))
        needle = "a" + "b" * n + "c"

        assert pattern.search(noise + "b" * (n + 2)) is None
        found = pattern.search(noise + needle)
        assert found is not None and (found.start, found.text) == (len(noise), needle)

    def test_the_longest_allowed_pattern_reads_the_largest_text(self) -> None:
        source = "".join(f"w{i:03d}|" for i in range(399)) + "last!"
        assert len(source) <= MAX_PATTERN_CHARS
        text = "w" * (MAX_TEXT_CHARS - 5) + "last!"

        found = compile_pattern(source).search(text)

        assert found is not None and (found.start, found.text) == (MAX_TEXT_CHARS - 5, "last!")

    def test_it_reads_only_the_first_characters_of_a_longer_text(self) -> None:
        pattern = compile_pattern("needle")
        assert pattern.search("x" * (MAX_TEXT_CHARS - 6) + "needle") is not None
        assert pattern.search("x" * (MAX_TEXT_CHARS - 5) + "needle") is None


def _window(n: int) -> str:
    """Return `a[ab]{n}c`, its repetition split in RE2's largest count (1000)."""
    return "a" + "".join(f"[ab]{{{min(1000, n - i)}}}" for i in range(0, n, 1000)) + "c"


def _size(source: str) -> int:
    return int(re2.compile(source).programsize)
