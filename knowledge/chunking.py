"""Split a document's Markdown-like text into chunks that search finds and steps cite.

Sections first (each `#` heading starts one, and every chunk knows the path of headings it
falls under, "Guide › Install"); within a section, whole paragraphs packed up to `size`
characters; a paragraph longer than that is cut at sentence ends, then line ends, then between
words, and a word longer than a chunk (a URL, a hash) by characters. A chunk after the first of
its section begins with the end of the one before it (`overlap` characters at most, from a word
boundary), so that a passage cut in two is still found whole in one of them.

Pure Python: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

HEADING_SEPARATOR = " › "

_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# The finer cuts, in order, for a paragraph still longer than a chunk, each with the separator
# that stands for it when the pieces are joined again.
_CUTS = (
    (re.compile(r"(?<=[.!?;:\u3002\uff01\uff1f])\s+"), " "),  # sentence ends
    (re.compile(r"[ \t]*\n\s*"), "\n"),  # line ends
    (re.compile(r"\s+"), " "),  # words
)
PARAGRAPH_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class ChunkText:
    heading: str
    text: str
    # How many characters at the start of `text` repeat the end of the chunk before it.
    overlap: int = 0


def split(text: str, size: int, overlap: int) -> list[ChunkText]:
    """Return `text` cut into chunks of at most `size` characters, in order."""
    if size < 1:
        raise ValueError("the chunk size must be at least 1 character")
    if not 0 <= overlap < size:
        raise ValueError("the overlap must be from 0 to less than the chunk size")
    chunks: list[ChunkText] = []
    for heading, paragraphs in sections(text):
        pieces = [piece for paragraph in paragraphs for piece in _fit(paragraph, size)]
        chunks += _pack(heading, pieces, size, overlap)
    return chunks


def sections(text: str) -> Iterator[tuple[str, list[str]]]:
    """Yield each section's heading path and its paragraphs (a fenced code block, blank lines
    and all, is one paragraph; a `#` line inside it is code, not a heading)."""
    path: list[tuple[int, str]] = []
    paragraphs: list[str] = []
    lines: list[str] = []
    fence = ""

    def end_paragraph() -> None:
        paragraph = "\n".join(lines).strip("\n").rstrip()
        if paragraph.strip():
            paragraphs.append(paragraph)
        lines.clear()

    for line in text.split("\n"):
        if fence:
            lines.append(line)
            if line.strip().startswith(fence):
                fence = ""
                end_paragraph()
            continue
        if opened := _FENCE.match(line):
            end_paragraph()
            fence = opened.group(1)[:3]
            lines.append(line)
            continue
        heading = _ATX_HEADING.match(line)
        if heading:
            end_paragraph()
            if paragraphs:
                yield _heading_path(path), paragraphs
                paragraphs = []
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level]
            path.append((level, " ".join(heading.group(2).split())))
            continue
        if not line.strip():
            end_paragraph()
            continue
        lines.append(line)
    end_paragraph()
    if paragraphs:
        yield _heading_path(path), paragraphs


def _heading_path(path: list[tuple[int, str]]) -> str:
    return HEADING_SEPARATOR.join(title for _, title in path)


def _fit(paragraph: str, size: int) -> list[tuple[str, str]]:
    """Return the paragraph as (separator before it, piece) pairs, each piece at most `size`
    characters; the first piece's separator is the paragraph break."""
    pieces = _cut(paragraph, size, 0)
    first_separator, first = pieces[0]
    return [(PARAGRAPH_SEPARATOR, first), *pieces[1:]] if first_separator == "" else pieces


def _cut(text: str, size: int, level: int) -> list[tuple[str, str]]:
    if len(text) <= size:
        return [("", text)]
    if level == len(_CUTS):
        return [("", text[start : start + size]) for start in range(0, len(text), size)]
    pattern, separator = _CUTS[level]
    out: list[tuple[str, str]] = []
    for index, part in enumerate(p for p in pattern.split(text) if p.strip()):
        sub = _cut(part.strip() if level == len(_CUTS) - 1 else part.rstrip(), size, level + 1)
        if index:
            sub[0] = (separator, sub[0][1])
        out += sub
    return out or [("", text[:size])]


def _pack(heading: str, pieces: list[tuple[str, str]], size: int, overlap: int) -> list[ChunkText]:
    """Pack pieces (each at most `size`) into chunks of at most `size`, each after the first
    opening with the end of the previous one (shortened, or left out, to make room)."""
    chunks: list[ChunkText] = []
    text = ""
    carried = 0
    for separator, piece in pieces:
        if not text:
            text, carried = piece, 0
        elif len(text) + len(separator) + len(piece) <= size:
            text += separator + piece
            continue
        else:
            chunks.append(ChunkText(heading, text, carried))
            room = size - len(piece) - len(separator)
            prefix = tail(text, min(overlap, room)) if room > 0 else ""
            text = prefix + separator + piece if prefix else piece
            carried = len(prefix) + len(separator) if prefix else 0
    if text:
        chunks.append(ChunkText(heading, text, carried))
    return chunks


def tail(text: str, limit: int) -> str:
    """Return the end of `text`, at most `limit` characters, starting at a word if it can."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text.strip()
    end = text[-limit:]
    if not text[-limit - 1].isspace():
        # Drop the part of a word cut in two, unless the end has no word break at all
        # (a long token, or a script written without spaces).
        cut = re.search(r"\s", end)
        if cut is not None:
            end = end[cut.end() :]
    return end.strip()
