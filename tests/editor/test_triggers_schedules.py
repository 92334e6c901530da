"""The Triggers tab's schedules: cron, zone, next runs, last run, missed ticks, pause/resume."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from runner.models import Run
from triggers.models import Schedule
from triggers.schedules import services
from workflows.models import Recipe
from workflows.services import recipe_publish, recipe_update

from .conftest import draft, htmx_post

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 3, 14, 0, 30, tzinfo=UTC)


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "clock", lambda: NOW)


@pytest.fixture
def scheduled(story: Recipe, author: Any) -> Recipe:
    doc = draft(story)
    doc["schedules"] = [{"name": "hourly", "cron": "0 * * * *", "inputs": {"topic": "tides"}}]
    recipe_update(recipe=story, document=doc)
    recipe_publish(recipe=story, user=author)
    return story


def test_the_tab_says_when_there_are_no_schedules(published: Recipe, web: Client) -> None:
    page = web.get(reverse("recipe-triggers", args=[published.slug])).content.decode()
    assert "Schedules" in page and "None." in page


def test_the_tab_shows_each_schedule_with_its_next_runs_and_last_run(
    scheduled: Recipe, web: Client
) -> None:
    services.schedules_tick(now=datetime(2026, 12, 3, 15, 0, 5, tzinfo=UTC))
    run = Run.objects.get()
    page = web.get(reverse("recipe-triggers", args=[scheduled.slug])).content.decode()
    assert "<code>0 * * * *</code> in UTC" in page
    assert "At the start of every hour" in page
    assert 'datetime="2026-12-03T16:00:00+00:00"' in page  # the next of three
    assert f'href="{reverse("run-monitor", args=[run.pk])}"' in page
    assert "Pause</button>" in page and 'hx-post="' in page


def test_a_schedules_run_says_so_on_its_page(scheduled: Recipe, web: Client) -> None:
    services.schedules_tick(now=datetime(2026, 12, 3, 15, 0, 5, tzinfo=UTC))
    page = web.get(reverse("run-monitor", args=[Run.objects.get().pk])).content.decode()
    assert "Started by the schedule hourly at 2026-12-03T15:00Z, for ada on" in page


def test_the_tab_reports_missed_ticks(scheduled: Recipe, web: Client) -> None:
    services.schedules_tick(now=datetime(2026, 12, 3, 18, 30, tzinfo=UTC))
    page = web.get(reverse("recipe-triggers", args=[scheduled.slug])).content.decode()
    assert "4 ticks missed between 2026-12-03 15:00 UTC and 2026-12-03 18:00 UTC." in page


def test_pause_and_resume_post_back_the_section(scheduled: Recipe, web: Client) -> None:
    url = reverse("recipe-schedule-pause", args=[scheduled.slug, "hourly"])
    response = htmx_post(web, url, None)
    assert response.status_code == 200
    section = response.content.decode()
    assert 'id="trigger-schedules"' in section and "Resume</button>" in section
    assert "Paused by ada" in section
    assert Schedule.objects.get().paused_at is not None
    resumed = htmx_post(
        web, reverse("recipe-schedule-resume", args=[scheduled.slug, "hourly"]), None
    )
    assert "Pause</button>" in resumed.content.decode()
    assert Schedule.objects.get().paused_at is None


def test_a_stranger_cannot_pause_a_schedule(scheduled: Recipe, stranger_web: Client) -> None:
    url = reverse("recipe-schedule-pause", args=[scheduled.slug, "hourly"])
    assert htmx_post(stranger_web, url, None).status_code == 404
    assert Schedule.objects.get().paused_at is None


def test_a_pause_needs_the_csrf_token(scheduled: Recipe, author: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(author)
    url = reverse("recipe-schedule-pause", args=[scheduled.slug, "hourly"])
    assert client.post(url, HTTP_HX_REQUEST="true").status_code == 403
    assert Schedule.objects.get().paused_at is None


def test_an_unknown_schedule_is_a_404(scheduled: Recipe, web: Client) -> None:
    url = reverse("recipe-schedule-pause", args=[scheduled.slug, "nightly"])
    assert htmx_post(web, url, None).status_code == 404
