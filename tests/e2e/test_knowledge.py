"""Knowledge bases in a real browser: create one, upload a file and watch it being indexed,
search it; then give a recipe step a source and try its query in the step panel."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge.ingest import add_document, create_base, ingest_document
from knowledge.models import Document, KnowledgeBase
from workflows.models import Recipe

from .conftest import BrowserPage
from .editor_page import apply_panel, click_settled

pytestmark = pytest.mark.e2e

GUIDE = """# Lighthouse guide

## Lamps

The lamp of a lighthouse turns once every ten seconds. Keepers trim the wick at dusk.

## Storms

In a storm the keeper rings the fog bell and logs every passing ship.
"""


def test_an_author_builds_a_knowledge_base_and_searches_it(
    browser_page: BrowserPage, e2e_user: Any, run_worker: Any
) -> None:
    page = browser_page.open("/")
    page.click("nav >> text=Knowledge")
    page.fill("#id_name", "Lighthouse")
    page.click(".create-base button[type=submit]")
    page.wait_for_url("**/knowledge/lighthouse/")
    assert KnowledgeBase.objects.get().owner == e2e_user

    page.set_input_files(
        "#id_files",
        [{"name": "guide.md", "mimeType": "text/markdown", "buffer": GUIDE.encode()}],
    )
    page.click("#upload-card button[type=submit]")
    page.wait_for_selector("#upload-card .outcomes li.ok")
    assert "guide.md: added" in page.inner_text("#upload-card .outcomes")
    # The table polls every second until the document is indexed, then stops.
    page.wait_for_selector("#documents tr.document[data-status=ready]", timeout=30000)
    page.wait_for_selector("#documents[data-polling=false]")
    row = page.locator("#documents tr.document").first
    assert row.locator("progress").get_attribute("value") == "100"
    assert "100%" in row.inner_text() and "Ready" in row.inner_text()
    assert Document.objects.get().status == Document.Status.READY
    browser_page.screenshot("indexed")

    page.fill("#search-card [name=q]", "fog bell")
    page.click("#search-card button[type=submit]")
    page.wait_for_selector("#search-results .hit")
    first = page.inner_text("#search-results .hit")
    assert "Lighthouse guide" in first and "Storms" in first
    assert "fog bell" in first
    browser_page.screenshot("searched")

    page.click("#documents tr.document a")
    page.wait_for_selector(".chunks .chunk")
    assert "fog bell" in page.inner_text(".chunks")


def test_a_step_gets_a_source_and_tries_its_query_inline(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe, run_worker: Any
) -> None:
    base = create_base(owner=e2e_user, slug="lighthouse", name="Lighthouse")
    document, _ = add_document(base, e2e_user, "guide.md", GUIDE.encode())
    ingest_document(document.pk)

    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.step >> text=Write")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    assert page.is_visible("#panel fieldset.sources")
    click_settled(page, "#panel [data-source-add]")
    row = page.locator("#panel [data-source-row]").first
    assert row.get_attribute("aria-label") == "Source 1"
    row.locator("[name='sources-0-knowledge_base']").select_option("lighthouse")
    row.locator("[name='sources-0-query']").fill("{topic}")
    row.locator("[name='sources-0-top_k']").fill("2")

    row.locator("button.try").click()
    page.wait_for_selector("#panel .source-hits .field-error")
    assert "Type a sample query" in row.locator(".source-hits").inner_text()
    row.locator("[name='sources-0-sample']").fill("wick at dusk")
    row.locator("button.try").click()
    page.wait_for_selector("#panel .source-hits .hit")
    hits = row.locator(".source-hits").inner_text()
    assert "Lighthouse guide" in hits and "wick" in hits
    row.locator(".source-hits").scroll_into_view_if_needed()
    browser_page.screenshot("tried")

    # A second row added and removed leaves the first one as it was.
    click_settled(page, "#panel [data-source-add]")
    page.locator("#panel [data-source-row]").nth(1).locator("[data-source-remove]").click()
    assert page.locator("#panel [data-source-row]").count() == 1
    assert page.input_value("#panel [name='sources-TOTAL_FORMS']") == "1"

    apply_panel(page)
    sources = page.evaluate("branchline.nodeByKey('write').data('step').sources")
    assert sources == [
        {
            "knowledge_base": "lighthouse",
            "query": "{topic}",
            "top_k": 2,
            "min_score": 0.0,
            "mode": "hybrid",
        }
    ]
    # The panel reopens with the source it wrote.
    assert page.input_value("#panel [name='sources-0-query']") == "{topic}"
