"""Upload a PDF in the run form of the regulatory demo and watch its tree choose the prompt on the
monitor: the PII leaf for a page with a valid card number, the image leaf for a PDF with an
image and a sensitive keyword."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.documents import VALID_CARD, pdf

pytest_plugins = ("tests.e2e.live_app",)
pytestmark = pytest.mark.e2e

LIVE_TIMEOUT_MS = 20_000


def run_on_upload(page: Page, path: Path) -> None:
    page.goto("/recipes/regulatory-decision-tree/run/")
    page.get_by_label(re.compile(r"^document \(file\)")).set_input_files(str(path))
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))


@pytest.mark.parametrize(
    ("pages", "images_on", "leaf", "step"),
    [
        pytest.param(
            ["Loan application for Jane Roe.", f"Card on file: {VALID_CARD}."],
            (),
            "pii_focused",
            "classify_pii",
            id="pii",
        ),
        pytest.param(
            ["Product sheet.", "The weapon shown below is a replica."],
            (2,),
            "image_focused",
            "classify_images",
            id="image",
        ),
    ],
)
def test_the_tree_picks_its_leaf_from_an_uploaded_pdf(
    login: Any,
    tmp_path: Path,
    pages: list[str],
    images_on: tuple[int, ...],
    leaf: str,
    step: str,
) -> None:
    document = tmp_path / f"{leaf}.pdf"
    document.write_bytes(pdf(pages, images_on=images_on))
    author = login("demo")
    page = author.new_page()

    run_on_upload(page, document)

    expect(page.locator("#run-header [data-run-status]")).to_have_text(
        "Succeeded", timeout=LIVE_TIMEOUT_MS
    )
    tree = page.locator('article[data-step="choose_prompt"]')
    expect(tree.locator("pre.text").first).to_have_text(leaf)
    expect(page.locator(f'article[data-step="{step}"]')).to_be_visible()
    assert author.errors == []
