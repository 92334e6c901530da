"""Shared fixtures: users and groups, the standard actors, API clients and an imported recipe."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from django.contrib.auth.models import Group
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.test import Client
from kombu.asynchronous import set_event_loop
from rest_framework.test import APIClient

from config.celery import app as celery_app
from tests.factories import (
    JUDGE,
    OPENAI,
    REVIEWERS,
    WRITER,
    ActorFactory,
    GroupFactory,
    UserFactory,
    recipe_document,
)
from tests.live_server import free_port
from workflows.models import Actor, Recipe
from workflows.services import recipe_import


@dataclass
class Actors:
    writer: Actor
    judge: Actor
    openai: Actor
    editors: Actor
    reviewers: Group


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Create the test database, and close every connection to it before it is dropped.

    PostgreSQL will not drop a database that still has sessions ("being accessed by other
    users"), and some outlive their tests: Channels' test communicators turn off the clean-up
    of `database_sync_to_async`, so a consumer's connection stays open in its application's
    context (Django keeps connections per thread and context), out of reach of
    `connections.close_all()`, until the garbage collector gets to it.
    """
    opened: weakref.WeakSet[BaseDatabaseWrapper] = weakref.WeakSet()

    def track(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
        opened.add(connection)

    connection_created.connect(track, weak=False, dispatch_uid="tests-track-connections")
    yield
    connection_created.disconnect(dispatch_uid="tests-track-connections")
    with django_db_blocker.unblock():
        for wrapper in list(opened):
            # By now the thread that opened it is idle or gone: closing it from here is safe.
            wrapper.inc_thread_sharing()
            try:
                wrapper.close()
            finally:
                wrapper.dec_thread_sharing()


@pytest.fixture
def user(db: None) -> Any:
    return UserFactory(username="alice")


@pytest.fixture
def other_user(db: None) -> Any:
    return UserFactory(username="mallory")


@pytest.fixture
def staff_user(db: None) -> Any:
    return UserFactory(username="sam", staff=True)


@pytest.fixture
def superuser(db: None) -> Any:
    return UserFactory(username="root", superuser=True)


@pytest.fixture
def admin_client(superuser: Any) -> Client:
    """The Django admin, signed in as `superuser` (in place of pytest-django's own)."""
    client = Client()
    client.force_login(superuser)
    return client


@pytest.fixture
def reviewers(db: None) -> Group:
    return GroupFactory(name=REVIEWERS)


@pytest.fixture
def actors(db: None, reviewers: Group) -> Actors:
    """Create the actors recipe documents in the tests name: scripted, OpenAI and human."""
    return Actors(
        writer=ActorFactory(name=WRITER),
        judge=ActorFactory(name=JUDGE, config={"replies": ["9"]}),
        openai=ActorFactory(name=OPENAI, openai=True),
        editors=ActorFactory(name="editors-desk", human=True, group=reviewers),
        reviewers=reviewers,
    )


@pytest.fixture
def doc() -> dict[str, Any]:
    """Return a minimal valid recipe document (slug `short-story`)."""
    return recipe_document(slug="short-story", name="Short Story")


@pytest.fixture
def recipe(user: Any, actors: Actors, doc: dict[str, Any]) -> Recipe:
    """Return the minimal recipe, imported by `user` (its owner)."""
    return recipe_import(user=user, data=doc).recipe


def api_client(user: Any = None, *, raise_errors: bool = True) -> APIClient:
    """Return a DRF test client logged in as `user` (anonymous without one).

    With `raise_errors=False` a server error comes back as a 500 response instead of raising,
    for the tests that assert bad input never causes one.
    """
    client = APIClient()
    client.raise_request_exception = raise_errors
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def api(user: Any) -> APIClient:
    return api_client(user)


@pytest.fixture
def anon_api(db: None) -> APIClient:
    return api_client()


@pytest.fixture
def other_api(other_user: Any) -> APIClient:
    return api_client(other_user)


@pytest.fixture
def staff_api(staff_user: Any) -> APIClient:
    return api_client(staff_user)


@pytest.fixture(scope="module")
def celery_worker(django_db_setup: None, django_db_blocker: Any) -> Iterator[Any]:
    """Run a real Celery worker thread on the configured broker (memory:// or Redis).

    It starts after the test database exists, so its connections go to that database, and
    with an empty queue, so no message of an earlier test reaches it. It lives for one test
    module: tests elsewhere may queue runs they never wait for, and those must not be worked
    on while their database is flushed.
    """
    celery_app.conf.task_always_eager = False
    # The event loop (kombu's hub) is a process global that the last module's worker closed
    # when it stopped: a new worker would reuse it, and its timers (a countdown's message)
    # would never fire. Each worker gets a new one.
    set_event_loop(None)
    with django_db_blocker.unblock():
        celery_app.control.purge()
        root_level = logging.getLogger().level
        # The queue by name: Celery keeps the queues it first saw, and a module that sent to
        # the fault workers' queue first would leave a worker consuming that one alone.
        with start_worker(
            celery_app,
            pool="solo",
            perform_ping_check=False,
            shutdown_timeout=30,
            queues=[celery_app.conf.task_default_queue],
        ) as worker:
            # Celery's set-up lowers the root logger to its own level (error): later tests
            # that read warnings from the log would see them or not depending on test order.
            logging.getLogger().setLevel(root_level)
            yield worker
            celery_app.control.purge()


@pytest.fixture
def database_down(transactional_db: None) -> Iterator[None]:
    """Point the default database at something that refuses connections, then restore it."""
    settings_dict = connection.settings_dict
    saved = {key: settings_dict[key] for key in ("NAME", "HOST", "PORT")}
    saved_options = dict(settings_dict["OPTIONS"])
    reconnect()
    if connection.vendor == "postgresql":
        settings_dict["PORT"] = str(free_port())
        if "pool" in saved_options:
            # The pool waits this long for a connection before it gives up (PoolTimeout).
            settings_dict["OPTIONS"] = {**saved_options, "pool": {**saved_options["pool"]}}
            settings_dict["OPTIONS"]["pool"].update(min_size=0, timeout=1)
    else:
        settings_dict["NAME"] = "/nonexistent/branchline/db.sqlite3"
    try:
        yield
    finally:
        reconnect()
        settings_dict.update(saved)
        settings_dict["OPTIONS"] = saved_options


def reconnect() -> None:
    """Drop this thread's database connection (and the pool's), so the next query connects anew."""
    connection.close()
    if connection.vendor == "postgresql":
        connection.close_pool()
