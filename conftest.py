"""Test-run defaults: the suite runs with DEBUG off, so it needs a throwaway secret key."""

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "test-only-not-secret")
# Files given to test runs go to a throwaway folder of this test session.
os.environ.setdefault("RUN_FILES_ROOT", tempfile.mkdtemp(prefix="branchline-run-files-"))
# Tests start the workers they need themselves.
os.environ.setdefault("EMBEDDED_WORKER", "0")


def _own_redis_database(url: str, worker: str) -> str:
    """Return `url` on the Redis database of pytest-xdist's worker `worker` ("gw0", "gw1"...).

    Workers share nothing: each has its own test database (pytest-django) and, here, its own
    Redis database, counted down from the one REDIS_URL names: one worker's purge of the Celery
    queue or its run groups (run ids start at 1 in every test database) must not reach another.
    """
    base, _, db = url.rstrip("/").rpartition("/")
    number = int(db) - int(worker.removeprefix("gw")) if db.isdigit() else -1
    if number < 0:
        raise SystemExit(
            f"REDIS_URL {url}: with {worker}, name a database numbered {worker.removeprefix('gw')} or more (15)"
        )
    return f"{base}/{number}"


_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _xdist_worker:
    # The folder was made by the controlling process: each worker keeps its files in its own.
    os.environ["RUN_FILES_ROOT"] = os.path.join(os.environ["RUN_FILES_ROOT"], _xdist_worker)
    os.makedirs(os.environ["RUN_FILES_ROOT"], exist_ok=True)
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = _own_redis_database(os.environ["REDIS_URL"], _xdist_worker)


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Run the browser tests last.

    Playwright's sync API keeps an event loop running in the main thread while its browser is
    open, and asyncio tests (the websocket consumers) cannot start their own after that.
    """
    items.sort(key=lambda item: "/tests/e2e/" in str(item.path))


def pytest_make_parametrize_id(config, val, argname):  # type: ignore[no-untyped-def]
    """Name a bytes parameter by its argument, not by its content.

    The sample documents are written at collection (a PDF's id and a zip's timestamps differ
    each time), and pytest-xdist's processes must collect the same test names.
    """
    return argname if isinstance(val, bytes) else None
