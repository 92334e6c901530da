"""The Triggers tab in the browser: a published recipe's webhook shows its address, where its
secret is kept and its curl example, and the Copy buttons put them on the clipboard."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import BrowserPage
from tests.editor.conftest import story_document
from tests.triggers.hooks import SECRET, SECRET_ENV
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.e2e


def test_the_tab_shows_a_hook_and_copies_its_address_and_example(
    browser_page: BrowserPage,
    live_server: Any,
    e2e_user: Any,
    story_actors: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    hooks = [{"name": "ticket", "secret_env": SECRET_ENV, "inputs": {"topic": "issue.title"}}]
    recipe = recipe_import(user=e2e_user, data=story_document(webhooks=hooks)).recipe
    recipe_publish(recipe=recipe, user=e2e_user)
    page = browser_page.open_editor(recipe.slug)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])

    page.click("#tab-triggers")
    page.wait_for_selector("#webhook-ticket")
    section = page.inner_text("#webhook-ticket")
    address = f"{live_server.url}/api/hooks/{recipe.slug}/ticket"
    assert address in section
    assert SECRET_ENV in section and "set on this server" in section
    assert SECRET not in page.content()

    page.click("#webhook-ticket [data-copy^='webhook-url']")
    page.wait_for_function(
        "document.querySelector(\"[data-copy^='webhook-url']\").textContent === 'Copied'"
    )
    assert page.evaluate("navigator.clipboard.readText()") == address
    page.click("#webhook-ticket summary")
    page.click("#webhook-ticket [data-copy^='webhook-curl']")
    page.wait_for_function(
        "document.querySelector(\"[data-copy^='webhook-curl']\").textContent === 'Copied'"
    )
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("BODY=") and address in copied
    browser_page.screenshot("triggers")
