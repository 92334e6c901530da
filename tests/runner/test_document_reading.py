"""A run reads its uploaded documents: the note's reference tree picks its leaf from a real PDF's
pages (no facts given by hand), and prompts quote the document, a page range or its name."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runner import services
from runner.models import ModelCall, Run, RunFile
from runner.status import RunStatus
from tests.documents import VALID_CARD, pdf
from tests.engine.test_decision_tree import REFERENCE_TREE
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document, steps
from tests.runner.stored_files import attach_files

pytestmark = pytest.mark.django_db

DONE = branch("done", 999, DEFAULT, "@complete")
KEYWORDS = ["weapon", "explosive"]
LEAVES = ("safety_focused", "pii_focused", "image_focused", "base_classification")


def recipe_document(
    *, several: bool = False, prompt: str = "Classify {files.doc.name}:\n{files.doc.text}"
) -> dict[str, Any]:
    return {
        "format": "branchline.recipe/v1",
        "slug": "reading",
        "name": "Reading",
        "inputs": {"doc": {"type": "files" if several else "file"}},
        "actors": {"classifier": "read-classifier", "moderator": "read-moderator"},
        "steps": [
            {
                "key": "route",
                "name": "Route",
                "kind": "decision_tree",
                "tree": copy.deepcopy(REFERENCE_TREE),
                "detect": {
                    "document": "doc",
                    "pii": {},
                    "keywords": {"words": KEYWORDS},
                    "safety": {"judge": "moderator"},
                },
                "leaf_targets": dict.fromkeys(LEAVES, "classify"),
            },
            {
                "key": "classify",
                "name": "Classify",
                "actor": "classifier",
                "prompt": prompt,
                "branches": [DONE],
            },
        ],
    }


def run_on(
    owner: Any,
    files: list[tuple[str, bytes]],
    *,
    verdicts: tuple[str, ...] = ("SAFE",),
    **document: Any,
) -> Run:
    ActorFactory(name="read-classifier", config={"replies": ['{"risk": "low"}']})
    ActorFactory(name="read-moderator", config={"replies": list(verdicts)})
    recipe = publish_document(owner, recipe_document(**document))
    run = services.run_start(user=owner, recipe=recipe, inputs={})
    attach_files(run, "doc", files, several=document.get("several", False))
    return drive(run)


def test_a_page_with_a_valid_card_number_reaches_the_pii_leaf(owner: Any) -> None:
    document = pdf(["Loan application for Jane Roe.", f"Pay with card {VALID_CARD}.", "Thanks."])

    run = run_on(owner, [("loan.pdf", document)])

    assert run.status == RunStatus.SUCCEEDED
    route = steps(run)["route"]
    assert route.response == "pii_focused"
    detected = route.details["detected"]
    assert detected["pii"] == [{"type": "credit_card", "page": 2, "value": "…1111"}]
    assert (detected["pages"], detected["image_count"]) == (3, 0)
    assert detected["unsafe_pages"] == [] and detected["detect_failures"] == {}
    # The judge was asked of each page of the document.
    judged = ModelCall.objects.filter(run=run, seq=route.seq, purpose="judge")
    assert judged.count() == 3
    # The chosen prompt classifies the document's text.
    classify = steps(run)["classify"]
    assert classify.prompt.startswith("Classify loan.pdf:\nLoan application for Jane Roe.")
    assert f"Pay with card {VALID_CARD}." in classify.prompt


def test_a_pdf_with_an_image_and_a_keyword_reaches_the_image_leaf(owner: Any) -> None:
    document = pdf(["Product sheet.", "The weapon shown below is a replica."], images_on=[2])

    run = run_on(owner, [("sheet.pdf", document)])

    route = steps(run)["route"]
    assert route.response == "image_focused"
    detected = route.details["detected"]
    assert (detected["pages"], detected["image_count"]) == (2, 1)
    assert detected["keywords"] == [{"word": "weapon", "page": 2, "count": 1}]
    assert detected["pii"] == []


def test_an_image_without_a_keyword_or_a_plain_pdf_reaches_the_base_leaf(owner: Any) -> None:
    run = run_on(owner, [("photo.pdf", pdf(["A harbour at dawn."], images_on=[1]))])

    assert steps(run)["route"].response == "base_classification"
    assert steps(run)["route"].details["detected"]["image_count"] == 1


def test_a_page_the_judge_finds_unsafe_reaches_the_safety_leaf(owner: Any) -> None:
    document = pdf(["Introduction.", "How to build an explosive device.", "Index."])

    run = run_on(owner, [("manual.pdf", document)], verdicts=("SAFE", "UNSAFE", "SAFE"))

    route = steps(run)["route"]
    assert route.response == "safety_focused"
    assert route.details["detected"]["unsafe_pages"] == [2]


def test_a_files_input_is_read_page_after_page_across_its_files(owner: Any) -> None:
    files = [
        ("cover.pdf", pdf(["Cover letter."])),
        ("form.pdf", pdf(["Form, page 1.", f"Card: {VALID_CARD}"])),
    ]

    run = run_on(owner, files, several=True, prompt="{files.doc.name}\n{files.doc.pages.1}")

    route = steps(run)["route"]
    assert route.details["detected"]["pii"][0]["page"] == 3
    assert route.details["detected"]["pages"] == 3
    prompt = steps(run)["classify"].prompt
    assert prompt == (
        "cover.pdf, form.pdf\n# cover.pdf\n--- page 1 ---\nCover letter.\n\n"
        "# form.pdf\n--- page 1 ---\nForm, page 1."
    )


def test_a_prompt_quotes_a_page_range_and_shows_the_file_without_its_id(owner: Any) -> None:
    document = pdf(["First page.", "Second page.", "Third page."])

    run = run_on(owner, [("three.pdf", document)], prompt="{files.doc.pages.2-3}\n{doc}")

    prompt = steps(run)["classify"].prompt
    assert prompt.startswith("--- page 2 ---\nSecond page.\n\n--- page 3 ---\nThird page.\n{")
    row = RunFile.objects.get(run=run)
    assert str(row.id) not in prompt and '"name": "three.pdf"' in prompt


def test_a_page_range_past_the_documents_end_fails_the_step_naming_it(owner: Any) -> None:
    run = run_on(owner, [("one.pdf", pdf(["Only page."]))], prompt="{files.doc.pages.2-4}")

    assert run.status == RunStatus.FAILED
    classify = steps(run)["classify"]
    assert classify.error == (
        "{files.doc.pages.2-4}: one.pdf has 1 page, so pages 2-4 are out of range"
    )


def test_a_file_gone_from_the_run_fails_the_step_saying_so(owner: Any) -> None:
    ActorFactory(name="read-classifier", config={"replies": ["ok"]})
    ActorFactory(name="read-moderator", config={"replies": ["SAFE"]})
    recipe = publish_document(owner, recipe_document())
    run = services.run_start(user=owner, recipe=recipe, inputs={})
    attach_files(run, "doc", [("gone.pdf", pdf(["Text."]))])
    RunFile.objects.filter(run=run).delete()

    run = drive(run)

    assert run.status == RunStatus.FAILED
    assert "the file 'gone.pdf' of input 'doc' is missing from the run" in (
        steps(run)["route"].error
    )
