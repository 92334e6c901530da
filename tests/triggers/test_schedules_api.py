"""The schedules API: list with next runs, pause and resume; who may do what."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import api_client
from tests.factories import UserFactory, recipe_document
from triggers.models import Schedule, ScheduleTick
from triggers.schedules import services
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish, recipe_share

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 3, 14, 0, 30, tzinfo=UTC)
SCHEDULES = [
    {
        "name": "morning",
        "cron": "0 9 * * MON-FRI",
        "timezone": "Europe/Paris",
        "inputs": {"topic": "news"},
    },
    {"cron": "*/15 * * * *", "inputs": {"topic": "alerts"}, "active": False},
]


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "clock", lambda: NOW)


@pytest.fixture
def digest(user: Any, actors: Any) -> Recipe:
    recipe = recipe_import(
        user=user, data=recipe_document(slug="digest", schedules=SCHEDULES)
    ).recipe
    recipe_publish(recipe=recipe, user=user)
    return recipe


def test_it_lists_the_schedules_with_their_next_three_runs(api: APIClient, digest: Recipe) -> None:
    response = api.get("/api/recipes/digest/schedules")
    assert response.status_code == 200, response.content
    morning, alerts = response.json()
    assert morning["key"] == "morning" and morning["state"] == "running"
    assert morning["description"] == "At 09:00 on Monday through Friday"
    # Thursday 3 December 2026: Friday, then Monday and Tuesday, at 09:00 in Paris (08:00 UTC).
    assert morning["next_runs"] == [
        "2026-12-04T08:00:00Z",
        "2026-12-07T08:00:00Z",
        "2026-12-08T08:00:00Z",
    ]
    assert (morning["version"], morning["last_tick"], morning["missed"]) == (1, None, None)
    assert (alerts["key"], alerts["state"], alerts["next_runs"]) == ("1", "inactive", [])


def test_it_shows_the_last_run_and_the_missed_ticks(api: APIClient, digest: Recipe) -> None:
    schedule = Schedule.objects.get(key="morning")
    ScheduleTick.objects.create(schedule=schedule, tick_at=NOW, error="inputs.topic: required")
    schedule.missed.create(count=3, first_at=NOW, last_at=NOW.replace(minute=2))
    (morning, _) = api.get("/api/recipes/digest/schedules/").json()
    assert morning["last_tick"] == {
        "at": "2026-12-03T14:00:30Z",
        "run": None,
        "late": False,
        "error": "inputs.topic: required",
    }
    assert morning["missed"]["count"] == 3
    assert morning["missed_summary"] == (
        "3 ticks missed between 2026-12-03 14:00 UTC and 2026-12-03 14:02 UTC"
    )


def test_the_owner_pauses_and_resumes_a_schedule(api: APIClient, digest: Recipe, user: Any) -> None:
    paused = api.post("/api/recipes/digest/schedules/morning/pause")
    assert paused.status_code == 200, paused.content
    assert (paused.json()["state"], paused.json()["paused_by"], paused.json()["next_runs"]) == (
        "paused",
        user.username,
        [],
    )
    assert api.post("/api/recipes/digest/schedules/morning/pause").json()["state"] == "paused"
    resumed = api.post("/api/recipes/digest/schedules/morning/resume/")
    assert resumed.status_code == 200
    assert resumed.json()["state"] == "running" and len(resumed.json()["next_runs"]) == 3


def test_a_schedule_without_a_name_is_known_by_its_index(api: APIClient, digest: Recipe) -> None:
    assert api.post("/api/recipes/digest/schedules/1/pause").json()["state"] == "paused"


def test_an_unknown_schedule_is_a_404_naming_it(api: APIClient, digest: Recipe) -> None:
    response = api.post("/api/recipes/digest/schedules/evening/pause")
    assert response.status_code == 404
    assert "no schedule 'evening'" in response.json()["detail"]


def test_someone_the_recipe_is_shared_with_may_pause_it(digest: Recipe, user: Any) -> None:
    colleague = UserFactory(username="carol")
    recipe_share(recipe=digest, users=[colleague], groups=[])
    client = api_client(colleague)
    assert client.post("/api/recipes/digest/schedules/morning/pause").status_code == 200
    assert Schedule.objects.get(key="morning").paused_by == colleague


def test_a_stranger_sees_no_schedules_and_pauses_none(other_api: APIClient, digest: Recipe) -> None:
    assert other_api.get("/api/recipes/digest/schedules").status_code == 404
    assert other_api.post("/api/recipes/digest/schedules/morning/pause").status_code == 404
    assert Schedule.objects.get(key="morning").paused_at is None


def test_an_anonymous_client_is_refused(anon_api: APIClient, digest: Recipe) -> None:
    assert anon_api.get("/api/recipes/digest/schedules").status_code in (401, 403)
    assert anon_api.post("/api/recipes/digest/schedules/morning/pause").status_code in (401, 403)
    assert Schedule.objects.get(key="morning").paused_at is None


def test_a_bad_schedule_is_refused_at_import_naming_its_field(api: APIClient, actors: Any) -> None:
    doc = recipe_document(slug="bad", schedules=[{"cron": "0 25 * * *", "timezone": "Mars/Base"}])
    response = api.post("/api/recipes/import", doc, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert "schedules[0].cron: Bad hour in '0 25 * * *'" in errors
    assert any(e.startswith("schedules[0].timezone: unknown time zone 'Mars/Base'") for e in errors)
    assert "schedules[0].inputs.topic: is required (the recipe has no default for it)" in errors
    assert not Recipe.objects.filter(slug="bad").exists()


def test_an_unknown_field_of_a_schedule_is_refused(api: APIClient, actors: Any) -> None:
    doc = recipe_document(
        slug="bad", schedules=[{"cron": "0 9 * * *", "inputs": {"topic": "x"}, "every": 5}]
    )
    response = api.post("/api/recipes/import", doc, format="json")
    assert response.status_code == 400
    assert "schedules[0].every: unknown field" in response.json()["errors"]


def test_schedules_survive_export_and_import(api: APIClient, digest: Recipe) -> None:
    exported = api.get("/api/recipes/digest/export").json()
    assert exported["schedules"] == SCHEDULES
