"""Browser tests: headless Debian Chromium (Playwright) against pytest-django's live server.

Without Chromium the tests are skipped, except on CI (`CI=true`), where that is a failure.
Screenshots are written to `test-artifacts/` (not committed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from tests.editor.conftest import STORY, story_document
from tests.factories import ActorFactory, GroupFactory, UserFactory
from workflows.models import Recipe
from workflows.services import recipe_import

# A test module imports the live-app fixtures' module before naming it in `pytest_plugins`:
# registered here, before that import, it is rewritten like a plugin and pytest does not warn.
pytest.register_assert_rewrite("tests.e2e.live_app")

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
LAUNCH_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-gpu"]


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """Launch headless Chromium once for the session."""
    if not CHROMIUM.exists():
        message = f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are
    # ordinary synchronous code, so Django's async-safety check must not refuse them.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=LAUNCH_ARGS
        )
        yield browser
        browser.close()
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def artifacts() -> Path:
    """Return the folder for screenshots (kept after the run; not committed)."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def run_worker(celery_worker: Any) -> Any:
    """A Celery worker thread in this process, so runs started from the pages execute."""
    return celery_worker


@pytest.fixture
def e2e_user(transactional_db: None) -> Any:
    return UserFactory(username="author")


@pytest.fixture
def story_actors(transactional_db: None) -> None:
    """The actors and reviewer group the editor tests' story recipe names."""
    GroupFactory(name="editor-reviewers")
    ActorFactory(name="editor-writer", config={"replies": [STORY]})
    ActorFactory(name="editor-judge", config={"replies": ["9"]})


@pytest.fixture
def story(e2e_user: Any, story_actors: None) -> Recipe:
    """The editor tests' story recipe (tests/editor/conftest.py), as a draft."""
    return recipe_import(user=e2e_user, data=story_document()).recipe


class BrowserPage:
    """A logged-in page, with the errors it raised and a screenshot helper."""

    def __init__(self, page: Any, base_url: str, name: str) -> None:
        self.page = page
        self.base_url = base_url
        self.name = name
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(f"{exc} {getattr(exc, 'stack', '')}"))
        page.on("console", self._console)

    def _console(self, message: Any) -> None:
        # Failed requests are not script errors (the tests assert on what the page shows), and
        # the WSGI live server has no websockets, which only the nav's live counters use.
        text = message.text
        if message.type != "error" or text.startswith("Failed to load resource"):
            return
        if text.startswith("WebSocket connection to"):
            return
        self.errors.append(text)

    def open(self, path: str) -> Any:
        self.page.goto(self.base_url + path)
        return self.page

    def open_editor(self, slug: str) -> Any:
        self.open(f"/recipes/{slug}/")
        self.wait_ready()
        return self.page

    def wait_ready(self) -> None:
        self.page.wait_for_function("window.branchline && window.branchline.ready", timeout=15000)

    def screenshot(self, label: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{self.name}-{label}.png"
        self.page.screenshot(path=str(path))
        return path


@pytest.fixture
def browser_page(
    chromium: Any, live_server: Any, e2e_user: Any, request: pytest.FixtureRequest
) -> Iterator[BrowserPage]:
    """A page logged in as `e2e_user`; it fails the test if the page raised a script error."""
    yield from _page_for(chromium, live_server, e2e_user, request.node.name)


@pytest.fixture
def open_page(
    chromium: Any, live_server: Any, request: pytest.FixtureRequest
) -> Iterator[Callable[..., BrowserPage]]:
    """Open more logged-in pages (a second tab), each in its own browser context."""
    pages: list[Iterator[BrowserPage]] = []

    def factory(user: Any, label: str) -> BrowserPage:
        generator = _page_for(chromium, live_server, user, f"{request.node.name}-{label}")
        pages.append(generator)
        return next(generator)

    yield factory
    for generator in pages:
        for _ in generator:
            pass


def _page_for(chromium: Any, live_server: Any, user: Any, name: str) -> Iterator[BrowserPage]:
    client = Client()
    client.force_login(user)
    context = chromium.new_context(
        viewport={"width": 1440, "height": 900}, base_url=live_server.url
    )
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    page = context.new_page()
    page.set_default_timeout(15000)
    page.on("dialog", lambda dialog: dialog.accept())
    wrapped = BrowserPage(page, live_server.url, re.sub(r"[^\w.-]+", "_", name))
    yield wrapped
    wrapped.screenshot("last")
    context.close()
    assert not wrapped.errors, f"the page raised script errors: {wrapped.errors}"
