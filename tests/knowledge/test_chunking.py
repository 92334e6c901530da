"""Chunks: sections by heading, paragraphs packed, finer cuts only when needed, overlap."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge.chunking import ChunkText, sections, split, tail

GUIDE = """Before any heading.

# Guide

Welcome to the guide.

## Install

Download it.

Run the installer.

### On Linux

Use the package.

## Use

Open it.

# Appendix

The end.
"""


def test_each_chunk_knows_the_headings_it_falls_under() -> None:
    chunks = split(GUIDE, size=1000, overlap=0)

    assert [(c.heading, c.text) for c in chunks] == [
        ("", "Before any heading."),
        ("Guide", "Welcome to the guide."),
        ("Guide › Install", "Download it.\n\nRun the installer."),
        ("Guide › Install › On Linux", "Use the package."),
        ("Guide › Use", "Open it."),
        ("Appendix", "The end."),
    ]


def test_it_packs_whole_paragraphs_and_cuts_none_that_fits() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 10 for i in range(6)]
    text = "\n\n".join(p.strip() for p in paragraphs)

    chunks = split(text, size=130, overlap=0)

    assert [c.text.count("Paragraph") for c in chunks] == [2, 2, 2]
    assert all(c.text.startswith("Paragraph") for c in chunks)


def test_a_long_paragraph_is_cut_at_sentence_ends() -> None:
    sentences = [f"Sentence number {i} says something." for i in range(10)]

    chunks = split(" ".join(sentences), size=80, overlap=0)

    assert all(c.text.endswith(".") for c in chunks)
    assert chunks[0].text.startswith("Sentence number 0 says something.")
    assert " ".join(c.text for c in chunks) == " ".join(sentences)


def test_a_long_sentence_is_cut_between_words_and_a_long_word_by_characters() -> None:
    chunks = split("alpha beta gamma delta " + "x" * 25, size=10, overlap=0)

    assert [c.text for c in chunks] == ["alpha beta", "gamma", "delta", "x" * 10, "x" * 10, "x" * 5]


def test_a_chunk_begins_with_the_end_of_the_one_before_it_in_its_section() -> None:
    text = "# A\n\n" + " ".join(f"w{i}" for i in range(40)) + "\n\n# B\n\nshort"

    chunks = split(text, size=40, overlap=12)

    first, second = chunks[0], chunks[1]
    carried = second.text[: second.overlap].strip()
    assert carried and first.text.endswith(carried)
    assert len(carried) <= 12
    assert chunks[-1] == ChunkText("B", "short", 0)  # nothing carried into another section


def test_a_heading_inside_a_code_fence_is_code() -> None:
    text = "# Real\n\n```\n# a comment\n\ncode()\n```\n\nafter"

    assert [(c.heading, c.text) for c in split(text, 1000, 0)] == [
        ("Real", "```\n# a comment\n\ncode()\n```\n\nafter")
    ]


def test_it_takes_no_text_as_no_chunks() -> None:
    assert split("", 100, 10) == []
    assert split("# Only a heading\n\n   \n", 100, 10) == []


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, -1), (10, 10), (10, 11)])
def test_it_refuses_sizes_that_cannot_make_progress(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match=r"chunk size|overlap"):
        split("text", size, overlap)


def test_tail_starts_at_a_word_when_it_can() -> None:
    assert tail("one two three", 7) == "three"
    assert tail("one two three", 8) == "three"
    assert tail("one two three", 9) == "two three"
    assert tail("abcdefgh", 3) == "fgh"
    assert tail("short", 10) == "short"
    assert tail("anything", 0) == ""


# Properties -------------------------------------------------------------------------------------

words = st.text(alphabet="abcdefghij", min_size=1, max_size=30)
sentence = st.lists(words, min_size=1, max_size=25).map(lambda ws: " ".join(ws) + ".")
paragraph = st.lists(sentence, min_size=1, max_size=8).map(" ".join)
section = st.tuples(
    st.integers(min_value=1, max_value=4),
    st.text(alphabet="ABCDEF ", min_size=1, max_size=12).filter(str.strip),
    st.lists(paragraph, min_size=0, max_size=4),
)
sizes = st.integers(min_value=20, max_value=400).flatmap(
    lambda size: st.tuples(st.just(size), st.integers(min_value=0, max_value=size // 2))
)


def squeezed(text: str) -> str:
    return "".join(text.split())


def new_text(chunks: list[ChunkText]) -> str:
    """Return what the chunks say, without what each repeats of the one before."""
    return "".join(squeezed(c.text[c.overlap :]) for c in chunks)


@settings(max_examples=300, deadline=None)
@given(st.lists(section, max_size=6), sizes)
def test_chunks_keep_every_word_in_order_within_size_under_their_headings(
    document: list[tuple[int, str, list[str]]], size_overlap: tuple[int, int]
) -> None:
    size, overlap = size_overlap
    text = "\n\n".join(
        f"{'#' * level} {title}\n\n" + "\n\n".join(paragraphs)
        for level, title, paragraphs in document
    )

    chunks = split(text, size, overlap)

    assert all(0 < len(c.text) <= size for c in chunks)
    assert all(c.text == c.text.strip() or c.text.strip() for c in chunks)
    assert new_text(chunks) == squeezed("".join(p for _, _, ps in document for p in ps))
    titles = {" ".join(title.split()) for _, title, _ in document}
    for chunk in chunks:
        assert set(chunk.heading.split(" › ")) <= titles


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=800), sizes)
def test_any_text_is_chunked_within_size_with_honest_overlaps(
    text: str, size_overlap: tuple[int, int]
) -> None:
    size, overlap = size_overlap

    chunks = split(text, size, overlap)

    assert all(0 < len(c.text) <= size and c.text.strip() for c in chunks)
    for previous, chunk in itertools.pairwise(chunks):
        carried = chunk.text[: chunk.overlap].rstrip()
        assert len(carried) <= overlap
        if chunk.overlap:
            assert chunk.heading == previous.heading
            assert previous.text.endswith(carried)
    body = "\n".join(text for _, paragraphs in sections(text) for text in paragraphs)
    assert new_text(chunks) == squeezed(body)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=400))
def test_text_without_headings_loses_nothing(text: str) -> None:
    text = text.replace("#", "").replace("`", "").replace("~", "")

    assert new_text(split(text, 50, 10)) == squeezed(text)
