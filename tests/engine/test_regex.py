from __future__ import annotations

import time

import pytest

from workflows.engine import RegexError, compile_pattern


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
    assert pattern.search("a" * 100_000 + "!") is None
    assert time.perf_counter() - began < 0.1


def test_it_reports_character_offsets_in_non_ascii_text() -> None:
    found = compile_pattern("dragón", "i").search("¡Un DRAGÓN!")
    assert found is not None and (found.text, found.start) == ("DRAGÓN", 4)


def test_it_caches_compiled_patterns() -> None:
    assert compile_pattern("cache-me", "i") is compile_pattern("cache-me", "i")
