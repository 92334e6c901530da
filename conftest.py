"""Test-run defaults: the suite runs with DEBUG off, so it needs a throwaway secret key."""

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "test-only-not-secret")
# Files given to test runs go to a throwaway folder of this test session.
os.environ.setdefault("RUN_FILES_ROOT", tempfile.mkdtemp(prefix="branchline-run-files-"))
# Tests start the workers they need themselves.
os.environ.setdefault("EMBEDDED_WORKER", "0")


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Run the browser tests last.

    Playwright's sync API keeps an event loop running in the main thread while its browser is
    open, and asyncio tests (the websocket consumers) cannot start their own after that.
    """
    items.sort(key=lambda item: "/tests/e2e/" in str(item.path))
