"""An llm step's `images`: the file inputs its model is shown as images, beside the prompt.

Each item names a `file` / `files` input of the recipe, as a string (`"photo"`) or as
`{"input": "scan", "pages": "1-3"}`. The runner sends an image file as it is and renders a
PDF's pages as images (every page, or those of `pages`: `"2"` or `"2-4"`, numbered from 1);
how many it sends in all is bounded by its settings. A step with images needs an actor that
sees them: it requires the `vision` capability (`capabilities.py`), checked at publish.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workflows.engine.capabilities import VISION, Capabilities
from workflows.engine.checks import listed
from workflows.engine.file_templates import parse_pages
from workflows.engine.reading import DocumentReader

# A step lists at most this many items (a `files` input or a PDF may give more images: the
# runner bounds those it sends).
MAX_IMAGE_ITEMS = 20
PDF = "application/pdf"
# What a step with images needs of its actor.
NEEDS = Capabilities(frozenset({VISION}))


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """One item of a step's `images`: the input, and a PDF's pages (None: every page)."""

    input: str
    first_page: int | None = None
    last_page: int | None = None

    @property
    def pages(self) -> str | None:
        """The page range as the recipe writes it ("2", "2-4"), None for every page."""
        if self.first_page is None:
            return None
        if self.last_page == self.first_page:
            return str(self.first_page)
        return f"{self.first_page}-{self.last_page}"

    def as_json(self) -> str | dict[str, str]:
        pages = self.pages
        return self.input if pages is None else {"input": self.input, "pages": pages}


def read_images(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> tuple[ImageSpec, ...]:
    """Read a step's `images`, reporting items that name no file input of the recipe."""
    path = f"{path}.images"
    value = doc.get("images")
    if value in (None, []):
        return ()
    if not isinstance(value, list):
        reader.error(path, "must be a list of file input names or {input, pages} objects")
        return ()
    if len(value) > MAX_IMAGE_ITEMS:
        reader.error(path, f"a step lists at most {MAX_IMAGE_ITEMS} images, got {len(value)}")
        return ()
    specs: list[ImageSpec] = []
    for i, item in enumerate(value):
        spec = _image(item, f"{path}[{i}]", reader)
        if spec is None:
            continue
        if spec in specs:
            reader.error(f"{path}[{i}]", "is listed twice")
        else:
            specs.append(spec)
    return tuple(specs)


def _image(item: object, path: str, reader: DocumentReader) -> ImageSpec | None:
    if isinstance(item, str):
        name, pages = item, None
    elif isinstance(item, Mapping):
        unknown = set(item) - {"input", "pages"}
        if unknown:
            reader.error(path, f"unknown field {sorted(unknown)[0]!r}; an item has input, pages")
            return None
        given = reader.text(item, "input", f"{path}.input", required=True)
        if given is None:
            return None
        name, pages = given, item.get("pages")
    else:
        reader.error(path, f"must be a file input name or {{input, pages}}, got {item!r}")
        return None
    where = f"{path}.input" if isinstance(item, Mapping) else path
    problem = reader.file_input_problem(name)
    spec = reader.inputs.get(name)
    if problem is not None or spec is None:
        if problem is not None:
            reader.error(where, problem)
        return None
    if pages is None:
        return ImageSpec(name)
    bounds = parse_pages(pages)
    if bounds is None:
        reader.error(
            f"{path}.pages", f'must be a page or a range of pages ("2", "1-3"), got {pages!r}'
        )
        return None
    accept = spec.get("accept")
    if accept and PDF not in accept:
        reader.error(
            f"{path}.pages", f"'{name}' takes no PDF ({listed(accept)}): only a PDF has pages"
        )
        return None
    return ImageSpec(name, *bounds)
