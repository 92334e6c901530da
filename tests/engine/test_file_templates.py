"""A file input's documents in templates (`{files.NAME.text}`, pages, page ranges, name) and
in a decision tree's `detect.document`."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from workflows.engine import RecipeInvalid, TemplateError, parse_recipe, render, template_names
from workflows.engine.detectors import DetectSpec, document_facts, document_pages
from workflows.engine.file_templates import MAX_DOCUMENT_CHARS, DocumentText
from workflows.engine.templating import TemplateContext

from .test_decision_tree import REFERENCE_TREE


def ref(name: str, pages: int = 1, image_count: int = 0) -> dict[str, Any]:
    return {
        "file": f"id-of-{name}",
        "name": name,
        "media_type": "application/pdf",
        "size": 1234,
        "pages": pages,
        "image_count": image_count,
    }


REPORT = DocumentText.of("report.pdf", "", ["Page one.", "Page two.", "Page three."])
NOTE = DocumentText.of("note.txt", "A short note.", [])
SCAN = DocumentText.of("scan.png", "", [])


def context(
    documents: Mapping[str, Sequence[DocumentText]], asked: list[str] | None = None
) -> TemplateContext:
    inputs: dict[str, Any] = {"topic": "loans", "doc": ref("report.pdf", 3)}
    inputs["many"] = [ref("report.pdf", 3), ref("note.txt")]

    def lookup(name: str) -> Sequence[DocumentText]:
        if asked is not None:
            asked.append(name)
        return documents[name]

    return TemplateContext(
        inputs,
        [],
        lambda key: "",
        documents=lookup,
        file_inputs={"doc": False, "many": True, "absent": False},
    )


CONTEXT = context({"doc": [REPORT], "many": [REPORT, NOTE]})


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{files.doc.name}", "report.pdf"),
        ("{files.doc.text}", "Page one.\n\nPage two.\n\nPage three."),
        (
            "{files.doc.pages}",
            "--- page 1 ---\nPage one.\n\n--- page 2 ---\nPage two.\n\n--- page 3 ---\nPage three.",
        ),
        ("{files.doc.pages.2}", "--- page 2 ---\nPage two."),
        ("{files.doc.pages.2-3}", "--- page 2 ---\nPage two.\n\n--- page 3 ---\nPage three."),
        ("{files.many.name}", "report.pdf, note.txt"),
        (
            "{files.many.text}",
            "# report.pdf\nPage one.\n\nPage two.\n\nPage three.\n\n# note.txt\nA short note.",
        ),
        (
            "{files.many.pages.1}",
            "# report.pdf\n--- page 1 ---\nPage one.\n\n# note.txt\n--- page 1 ---\nA short note.",
        ),
    ],
)
def test_it_shows_a_file_inputs_documents(template: str, expected: str) -> None:
    assert render(template, CONTEXT) == expected


def test_a_text_with_no_pages_is_one_page_and_an_image_has_none() -> None:
    assert NOTE.pages == ("A short note.",)
    assert SCAN.pages == () and SCAN.text == ""
    shown = context({"doc": [SCAN]})

    assert render("[{files.doc.text}][{files.doc.pages}]", shown) == "[][]"


def test_a_file_inputs_own_name_shows_its_refs_without_their_ids() -> None:
    shown = render("{doc} / {many}", CONTEXT)

    assert "id-of-" not in shown
    assert '"name": "report.pdf", "media_type": "application/pdf"' in shown
    assert shown.count('"pages": 3') == 2


def test_documents_are_read_only_when_a_template_names_them() -> None:
    asked: list[str] = []
    shown = context({"doc": [REPORT], "many": [REPORT, NOTE]}, asked)

    assert render("About {topic}: {doc}", shown) == "About loans: " + render("{doc}", CONTEXT)
    assert asked == []
    render("{files.doc.name}", shown)
    assert asked == ["doc"]
    assert "files.doc.text" in shown and "files.topic.text" not in shown


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{files.doc.pages.4}", "{files.doc.pages.4}: report.pdf has 3 pages, so page 4 is out"),
        (
            "{files.doc.pages.2-9}",
            "{files.doc.pages.2-9}: report.pdf has 3 pages, so pages 2-9 are",
        ),
        ("{files.many.pages.2}", "{files.many.pages.2}: note.txt has 1 page, so page 2 is out"),
    ],
)
def test_a_page_past_a_documents_end_is_an_error_naming_the_range(
    template: str, message: str
) -> None:
    with pytest.raises(TemplateError) as caught:
        render(template, CONTEXT)

    assert caught.value.message.startswith(message)


@pytest.mark.parametrize("template", ["{files.topic.text}", "{files.nothing.text}"])
def test_a_name_that_is_no_file_input_of_the_run_is_unknown_at_render(template: str) -> None:
    with pytest.raises(TemplateError, match="unknown template name"):
        render(template, CONTEXT)


def test_an_optional_file_input_given_no_file_is_an_error_that_says_so() -> None:
    with pytest.raises(TemplateError) as caught:
        render("{files.absent.text}", CONTEXT)

    assert caught.value.message == "{files.absent.text}: the run was given no file for 'absent'"


def test_a_long_document_is_cut_with_a_line_that_says_so() -> None:
    long = DocumentText.of("long.txt", "x" * (MAX_DOCUMENT_CHARS + 10), [])

    shown = render("{files.doc.text}", context({"doc": [long]}))

    assert shown.startswith("x" * MAX_DOCUMENT_CHARS + "\n[… {files.doc.text} cut: ")
    assert shown.endswith(f"the first 200,000 of {MAX_DOCUMENT_CHARS + 10:,} characters are shown]")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("files.doc", "names no part of the file: write {files.doc.text}"),
        ("files.doc.size", "unknown part 'size'; expected one of: text, pages, name"),
        ("files.doc.text.2", "only pages take a page range"),
        ("files.doc.pages.0", "'0' is not a page or a range of pages: write N or N-M"),
        ("files.doc.pages.3-1", "'3-1' is not a page or a range of pages"),
        ("files.doc.pages.two", "'two' is not a page or a range of pages"),
        ("files.doc.pages.1-", "'1-' is not a page or a range of pages"),
        ("files.doc.pages.1-2-3", "is not a page or a range of pages"),
        ("files.doc.name.__class__", "only pages take a page range"),
        ("files.", "is not a file's template name"),
    ],
)
def test_it_refuses_a_malformed_file_name_when_reading_a_template(name: str, message: str) -> None:
    with pytest.raises(TemplateError) as caught:
        template_names("{" + name + "}")

    assert message in caught.value.message


# -- in a recipe ----------------------------------------------------------------------------


def recipe(prompt: str, detect: Any = None) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {"key": "classify", "name": "Classify", "actor": "writer", "prompt": prompt}
    ]
    if detect is not None:
        tree_step = {
            "key": "route",
            "name": "Route",
            "kind": "decision_tree",
            "tree": copy.deepcopy(REFERENCE_TREE),
            "detect": detect,
            "leaf_targets": {
                "safety_focused": "@end",
                "pii_focused": "@end",
                "image_focused": "classify",
                "base_classification": "classify",
            },
        }
        steps.insert(0, tree_step)
    return {
        "format": "branchline.recipe/v1",
        "slug": "files",
        "name": "files",
        "inputs": {
            "doc": {"type": "file", "accept": ["application/pdf"]},
            "many": {"type": "files"},
            "topic": {"type": "string"},
        },
        "actors": {"writer": "w", "moderator": "m"},
        "steps": steps,
    }


def test_a_recipe_may_name_its_file_inputs_documents() -> None:
    prompt = "{files.doc.name}: {files.doc.pages.1-2} {files.many.text} {doc}"

    graph = parse_recipe(recipe(prompt))

    assert graph.step("classify").prompt == prompt


@pytest.mark.parametrize(
    ("prompt", "error"),
    [
        (
            "{files.topic.text}",
            "steps[0].prompt: {files.topic.text}: 'topic' is not a file input of the recipe; "
            "its file inputs: doc, many",
        ),
        (
            "{files.report.text}",
            "steps[0].prompt: {files.report.text}: 'report' is not a file input of the recipe; "
            "its file inputs: doc, many",
        ),
        ("{files.doc.pages.0-2}", "steps[0].prompt: {files.doc.pages.0-2}: '0-2' is not a page"),
    ],
)
def test_it_refuses_a_template_naming_no_file_input_or_a_malformed_range(
    prompt: str, error: str
) -> None:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(recipe(prompt))

    assert any(e.startswith(error) for e in caught.value.errors), caught.value.errors


def test_a_tree_may_read_a_file_inputs_document() -> None:
    graph = parse_recipe(recipe("Classify", {"document": "doc", "pii": {}}))

    detect = graph.step("route").detect
    assert detect is not None and detect.document == "doc" and detect.source == ""
    assert detect.pii_types is not None


def test_a_document_alone_gives_its_pages_and_images() -> None:
    graph = parse_recipe(recipe("Classify", {"document": "many"}))

    assert graph.step("route").detect == DetectSpec(document="many")


@pytest.mark.parametrize(
    ("detect", "error"),
    [
        ({"document": "topic", "pii": {}}, "steps[0].detect.document: 'topic' is not a file input"),
        ({"document": "cv", "pii": {}}, "steps[0].detect.document: 'cv' is not a file input"),
        ({"document": 3, "pii": {}}, "steps[0].detect.document: must be the name of a file input"),
        (
            {"document": "doc", "from": "{topic}", "pii": {}},
            "steps[0].detect: reads a document or a text (from), not both",
        ),
    ],
)
def test_it_refuses_a_detect_document_that_is_no_file_input(detect: Any, error: str) -> None:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(recipe("Classify", detect))

    assert any(e.startswith(error) for e in caught.value.errors), caught.value.errors


def test_the_detectors_read_every_files_pages_in_order_and_the_refs_give_the_counts() -> None:
    assert document_pages([REPORT, SCAN, NOTE]) == [
        "Page one.",
        "Page two.",
        "Page three.",
        "A short note.",
    ]
    refs = [ref("report.pdf", 3, image_count=2), ref("scan.png", 0, image_count=1)]

    assert document_facts(refs) == {"pages": 3, "image_count": 3}
    assert document_facts(ref("report.pdf", 3)) == {"pages": 3, "image_count": 0}
    assert document_facts(None) == {"pages": 0, "image_count": 0}
