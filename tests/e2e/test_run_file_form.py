"""The run form's file fields in a browser: a file dropped onto its field is listed with its
size, one too large is flagged before it is sent, and the run starts with the file stored."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from runner.models import RunFile
from tests import documents
from tests.e2e.conftest import BrowserPage
from tests.factories import ActorFactory
from tests.runner.test_run_files import papers_document
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.e2e

# Drops a file of `bytes` (base64) named `name` onto the field with the id given.
DROP = """
([id, name, content, type]) => {
  const bytes = Uint8Array.from(atob(content), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], name, { type }));
  const field = document.getElementById(id).closest(".field");
  field.dispatchEvent(new DragEvent("dragover", { dataTransfer: transfer, bubbles: true }));
  field.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true }));
}
"""


@pytest.fixture
def papers(e2e_user: Any) -> Recipe:
    ActorFactory(name="papers-writer", config={"replies": ["read"]})
    recipe = recipe_import(user=e2e_user, data=papers_document()).recipe
    recipe_publish(recipe=recipe, user=e2e_user)
    return recipe


def drop(page: Any, field_id: str, name: str, data: bytes, media_type: str) -> None:
    page.evaluate(DROP, [field_id, name, base64.b64encode(data).decode(), media_type])


def test_a_pdf_dropped_on_the_run_form_starts_a_run_with_it(
    browser_page: BrowserPage, papers: Recipe
) -> None:
    page = browser_page.open("/recipes/papers/run/")
    pdf = documents.pdf(["First", f"Card {documents.VALID_CARD}"])

    drop(page, "id_input_doc", "too-big.txt", b"x" * 200_001, "text/plain")
    listed = page.locator("#id_input_doc ~ ul.file-list li")
    expect(listed).to_have_text(["too-big.txt (195.3 KB)"])
    assert page.evaluate("document.getElementById('id_input_doc').validationMessage")

    drop(page, "id_input_doc", "report.pdf", pdf, "application/pdf")
    expect(listed).to_have_text([re.compile(r"^report\.pdf \(\d+\.\d KB\)$")])
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))

    stored = RunFile.objects.get()
    assert stored.name == "report.pdf" and stored.pages == ["First", f"Card {documents.VALID_CARD}"]
    assert not browser_page.errors


def test_a_refused_file_is_named_beside_its_field(
    browser_page: BrowserPage, papers: Recipe
) -> None:
    page = browser_page.open("/recipes/papers/run/")

    page.set_input_files(
        "#id_input_doc",
        files=[
            {
                "name": "locked.pdf",
                "mimeType": "application/pdf",
                "buffer": documents.encrypted_pdf(),
            }
        ],
    )
    page.get_by_role("button", name="Start run").click()

    expect(page.locator(".field.invalid .field-error")).to_contain_text(
        "locked.pdf: the PDF is encrypted"
    )
    assert not RunFile.objects.exists()
