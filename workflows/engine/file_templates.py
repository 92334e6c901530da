"""A run's documents in templates: `{files.NAME.text}`, `.pages`, `.pages.N`, `.pages.N-M`, `.name`.

NAME is a `file` or `files` input. The runner keeps each file's text and page texts (read once,
when it was uploaded); a template asks for them only when it names them (`TemplateContext`).

- `text`: the whole text; a `files` input's files each under a `# name` line.
- `pages`: every page, each under a `--- page N ---` line (N from 1).
- `pages.N`, `pages.N-M`: those pages only, marked the same way. The form is checked when the
  recipe is read; a page past a file's end is an error when the template is rendered.
- `name`: the file's name (a `files` input's, joined by ", ").

A substitution longer than `MAX_DOCUMENT_CHARS` is cut there, with a line that says so: a
prompt that quotes a long document stays within what a model reads.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workflows.engine.errors import TemplateError

PREFIX = "files."
PARTS = ("text", "pages", "name")
MAX_DOCUMENT_CHARS = 200_000
_REFERENCE = re.compile(r"files\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_]+)(?:\.(.*))?)?", re.DOTALL)
# A page or a range of pages, as templates and an llm step's `images` write them: "2", "2-4".
_PAGES = re.compile(r"(?P<first>[1-9][0-9]{0,4})(?:-(?P<last>[1-9][0-9]{0,4}))?")


@dataclass(frozen=True, slots=True)
class FileReference:
    """A `files.…` template name: the input, the part, and the pages asked for (None: all)."""

    input: str
    part: str
    first: int | None = None
    last: int | None = None


@dataclass(frozen=True, slots=True)
class DocumentText:
    """What a template reads of one file: its name, its text and its pages' texts."""

    name: str
    text: str
    pages: tuple[str, ...]

    @classmethod
    def of(cls, name: str, text: str, pages: Sequence[str]) -> DocumentText:
        """Return the document, a text with no pages read as one page (and pages with no
        text as their join): a template and a detector read the same pages."""
        kept = tuple(str(page) for page in pages) or ((text,) if text else ())
        return cls(name=name, text=text or "\n\n".join(kept), pages=kept)


@functools.lru_cache(maxsize=1024)
def _parse(name: str) -> tuple[FileReference | None, str | None]:
    found = _REFERENCE.fullmatch(name)
    if found is None:
        return None, f"{{{name}}} is not a file's template name; write {{files.NAME.text}}"
    input_name, part, pages = found.groups()
    if part is None:
        return None, (
            f"{{{name}}} names no part of the file: write {{{name}.text}}, "
            f"{{{name}.pages}} or {{{name}.name}}"
        )
    if part not in PARTS:
        return None, f"{{{name}}}: unknown part '{part}'; expected one of: text, pages, name"
    if pages is None:
        return FileReference(input_name, part), None
    if part != "pages":
        return None, f"{{{name}}}: only pages take a page range (files.{input_name}.pages.N-M)"
    bounds = parse_pages(pages)
    if bounds is None:
        return None, (
            f"{{{name}}}: '{pages}' is not a page or a range of pages: write N or N-M, "
            "numbered from 1, N not after M"
        )
    return FileReference(input_name, part, *bounds), None


def parse_pages(value: object) -> tuple[int, int] | None:
    """Return the first and last page of a range ("2" or "2-4"), None if it is not one."""
    match = _PAGES.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    first = int(match["first"])
    last = int(match["last"] or first)
    return (first, last) if first <= last else None


def is_file_name(name: str) -> bool:
    """Tell whether a template name is one of a file's (`files.…`), well formed or not."""
    return name.startswith(PREFIX)


def file_reference_problem(name: str) -> str | None:
    """Return why a `files.…` name is not well formed (a bad part or page range), or None."""
    return _parse(name)[1]


def file_reference(name: str) -> FileReference | None:
    """Return what a well-formed `files.…` name asks for, or None for any other name."""
    return _parse(name)[0] if is_file_name(name) else None


def _pages(reference: FileReference, name: str, document: DocumentText) -> list[str]:
    numbered = list(enumerate(document.pages, start=1))
    if reference.first is None or reference.last is None:
        return [f"--- page {n} ---\n{text}" for n, text in numbered]
    if reference.last > len(numbered):
        count = len(numbered)
        asked = (
            f"page {reference.first}"
            if reference.first == reference.last
            else f"pages {reference.first}-{reference.last}"
        )
        raise TemplateError(
            name,
            f"{{{name}}}: {document.name} has {count} page{'' if count == 1 else 's'}, "
            f"so {asked} {'is' if reference.first == reference.last else 'are'} out of range",
        )
    chosen = numbered[reference.first - 1 : reference.last]
    return [f"--- page {n} ---\n{text}" for n, text in chosen]


def render_file_reference(
    reference: FileReference, documents: Sequence[DocumentText], name: str, *, several: bool
) -> str:
    """Return what `{files.…}` shows of an input's documents (`several`: a files input's, each
    under its name), cut at MAX_DOCUMENT_CHARS; raise TemplateError naming a page range past a
    file's end."""
    if reference.part == "name":
        return ", ".join(document.name for document in documents)
    shown: list[str] = []
    for document in documents:
        if reference.part == "text":
            body = document.text
        else:
            body = "\n\n".join(_pages(reference, name, document))
        shown.append(f"# {document.name}\n{body}" if several else body)
    return cut("\n\n".join(shown), name)


def cut(text: str, name: str) -> str:
    """Return `text` cut at MAX_DOCUMENT_CHARS, with a line saying how much is shown."""
    if len(text) <= MAX_DOCUMENT_CHARS:
        return text
    return (
        f"{text[:MAX_DOCUMENT_CHARS]}\n[… {{{name}}} cut: the first {MAX_DOCUMENT_CHARS:,} of "
        f"{len(text):,} characters are shown]"
    )


def without_ids(value: object) -> object:
    """Return a file input's value as `{NAME}` shows it: each ref without its stored id (the
    model has no use for a storage key)."""
    if isinstance(value, list):
        return [without_ids(ref) for ref in value]
    if isinstance(value, Mapping):
        return {key: item for key, item in value.items() if key != "file"}
    return value
