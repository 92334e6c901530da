"""The stats pages of a recipe and of an actor: runs by outcome, tokens and cost over time,
latency percentiles and branch shares, as SVG with a table of the same numbers, counting only
the runs the user may see."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from runner.models import ModelCall, Run, StepRun
from tests.editor.conftest import story_document
from tests.editor.test_runs_pages import client_for, start
from tests.factories import ActorFactory
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.django_db

SVG = "{http://www.w3.org/2000/svg}"
TODAY = timezone.localdate


@pytest.fixture
def history(author: Any, published: Recipe) -> list[Run]:
    """Four real runs of the story: two approved, one ended, one waiting for a reviewer."""
    return [
        start(author, published),
        start(author, published),
        start(author, published, writer=["An error occurred: the story failed to appear at all."]),
        start(author, published, judge=["3"]),
    ]


def forget_recorded_calls() -> None:
    """Delete the calls the runs recorded (scripted answers, tokens estimated), for known ones."""
    ModelCall.objects.all().delete()


def call(run: Run, **fields: Any) -> ModelCall:
    fields.setdefault("purpose", ModelCall.Purpose.ANSWER)
    fields.setdefault("actor_name", "editor-writer")
    fields.setdefault("latency_ms", 100)
    fields.setdefault("started_at", timezone.now())
    return ModelCall.objects.create(run=run, seq=1, **fields)


def table(response: Any, key: str) -> dict[str, tuple[str, ...]]:
    """Return the rows of a chart's table by their first cell, as the page's context holds it."""
    return {row[0]: row[1:] for row in response.context[key].table.rows}


def chart_svg(html: str, key: str) -> ET.Element:
    found = re.search(rf'<svg [^>]*id="{key}".*?</svg>', html, re.S)
    assert found, f"no chart {key}"
    return ET.fromstring(found.group(0))


# -- access ----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/recipes/story/stats/", "/actors/editor-writer/"])
def test_the_stats_pages_need_a_login(story: Recipe, url: str) -> None:
    response = Client().get(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_another_user_gets_404_for_a_recipe_they_may_not_see(
    stranger_web: Client, history: list[Run]
) -> None:
    assert stranger_web.get("/recipes/story/stats/").status_code == 404


def test_an_actor_nobody_has_is_404(web: Client) -> None:
    assert web.get("/actors/no-such-actor/").status_code == 404


def test_a_reviewer_group_named_only_by_runs_has_a_page_for_who_may_see_those_runs(
    web: Client, stranger_web: Client, history: list[Run]
) -> None:
    waiting = history[3]
    name = waiting.steps.get(step_key="review").actor_name
    assert name == "@human:editor-reviewers"

    assert web.get(f"/actors/{name}/").status_code == 200
    assert stranger_web.get(f"/actors/{name}/").status_code == 404


# -- the recipe's page -----------------------------------------------------------------------


def test_it_draws_runs_by_outcome_with_a_table_of_the_same_numbers(
    web: Client, history: list[Run]
) -> None:
    response = web.get("/recipes/story/stats/")

    assert response.status_code == 200
    today = TODAY().isoformat()
    assert response.context["runs_chart"].table.head == (
        "Day",
        "approved",
        "ended",
        "in progress",
        "Total",
    )
    assert table(response, "runs_chart")[today] == ("2", "1", "1", "4")
    html = response.content.decode()
    svg = chart_svg(html, "runs")
    assert svg.find(f"{SVG}title").text == "Runs by outcome"  # type: ignore[union-attr]
    assert f"{today} · approved: 2" in [t.text for t in svg.iter(f"{SVG}title")]
    assert f'<th scope="row">{today}</th><td>2</td><td>1</td><td>1</td><td>4</td>' in html
    assert '<dd data-total="runs">4</dd>' in html
    assert "30 days" in html and 'aria-current="page"' in html


def test_it_draws_tokens_and_cost_per_day_from_the_model_calls(
    web: Client, history: list[Run]
) -> None:
    forget_recorded_calls()
    run = history[0]
    yesterday = timezone.now() - timedelta(days=1)
    call(run, tokens_in=10, tokens_out=20, cost=Decimal("0.0015"), currency="USD")
    call(run, tokens_in=5, tokens_out=5, cost=Decimal("0.0005"), currency="USD")
    call(run, tokens_in=100, tokens_out=1, started_at=yesterday)  # an actor without a price
    call(run, tokens_in=1000, tokens_out=1000, started_at=timezone.now() - timedelta(days=40))

    response = web.get("/recipes/story/stats/")

    tokens = table(response, "tokens_chart")
    assert tokens[TODAY().isoformat()] == ("15", "25", "40")
    assert tokens[(TODAY() - timedelta(days=1)).isoformat()] == ("100", "1", "101")
    assert (TODAY() - timedelta(days=40)).isoformat() not in tokens
    assert table(response, "cost_chart")[TODAY().isoformat()] == ("0.002",)
    totals = response.context["totals"]
    assert totals["tokens"] == 141
    assert totals["calls"] == 3
    assert totals["unpriced_calls"] == 1
    assert totals["cost"] == [("USD", "0.002")]
    html = response.content.decode()
    chart_svg(html, "tokens")
    chart_svg(html, "cost")
    assert "1 call had no price" in html

    wide = web.get("/recipes/story/stats/?days=90")
    assert table(wide, "tokens_chart")[(TODAY() - timedelta(days=40)).isoformat()] == (
        "1,000",
        "1,000",
        "2,000",
    )


def test_the_tokens_of_real_runs_add_up_to_the_runs_totals(web: Client, history: list[Run]) -> None:
    runs = Run.objects.filter(pk__in=[r.pk for r in history])
    spent = sum(r.tokens_in + r.tokens_out for r in runs)
    calls = sum(r.model_calls for r in runs)

    response = web.get("/recipes/story/stats/")

    assert calls > 0
    assert response.context["totals"]["tokens"] == spent
    assert response.context["totals"]["calls"] == calls


def test_it_shows_latency_percentiles_by_step_and_by_actor(web: Client, history: list[Run]) -> None:
    writes = StepRun.objects.filter(run__in=history, step_key="write").order_by("pk")
    assert len(writes) == 4
    for step, latency in zip(writes, (100, 200, 300, 400), strict=True):
        StepRun.objects.filter(pk=step.pk).update(latency_ms=latency)

    response = web.get("/recipes/story/stats/")

    assert table(response, "latency")["write"] == ("200 ms", "400 ms", "4")
    assert table(response, "actor_latency")["editor-writer"] == ("200 ms", "400 ms", "4")
    html = response.content.decode()
    chart_svg(html, "latency-steps")
    assert '<a href="/actors/editor-writer/">editor-writer</a>' in html


def test_it_shows_the_share_of_each_branch_taken(web: Client, history: list[Run]) -> None:
    response = web.get("/recipes/story/stats/")

    rows = response.context["branches"].table.rows
    assert ("write", "great", "2", "50%") in rows
    assert ("write", "broken", "1", "25%") in rows
    assert ("write", "to_review", "1", "25%") in rows
    svg = chart_svg(response.content.decode(), "branches")
    assert "write · great: 2 of 4 (50%)" in [t.text for t in svg.iter(f"{SVG}title")]


def test_it_counts_only_the_days_of_the_range(web: Client, history: list[Run]) -> None:
    Run.objects.filter(pk=history[0].pk).update(created_at=timezone.now() - timedelta(days=10))

    week = web.get("/recipes/story/stats/?days=7")
    month = web.get("/recipes/story/stats/?days=30")

    assert week.context["totals"]["runs"] == 3
    assert len(week.context["runs_chart"].table.rows) == 7
    assert month.context["totals"]["runs"] == 4
    assert len(month.context["runs_chart"].table.rows) == 30


@pytest.mark.parametrize("days", ["5", "abc", "-7", "٣٠", "30.0"])
def test_a_range_it_does_not_offer_is_a_clear_error(web: Client, story: Recipe, days: str) -> None:
    response = web.get("/recipes/story/stats/", {"days": days})

    assert response.status_code == 400
    assert "days: choose one of 7, 30, 90" in response.content.decode()


def test_a_recipe_without_runs_says_so_instead_of_drawing(web: Client, story: Recipe) -> None:
    response = web.get("/recipes/story/stats/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "No runs started in these days." in html
    assert "No branch taken in these days." in html
    assert "<svg" not in html


def test_a_user_sees_only_the_runs_of_recipes_they_may_see(
    web: Client, stranger: Any, stranger_web: Client, history: list[Run]
) -> None:
    theirs = recipe_import(user=stranger, data=story_document(slug="their-story")).recipe
    recipe_publish(recipe=theirs, user=stranger)
    start(stranger, theirs)
    forget_recorded_calls()
    call(history[0], tokens_in=10, tokens_out=10)

    mine = web.get("/actors/editor-writer/")
    their_view = stranger_web.get("/actors/editor-writer/")

    assert mine.context["totals"]["runs"] == 4
    assert mine.context["totals"]["tokens"] == 20
    assert their_view.status_code == 200
    assert their_view.context["totals"]["runs"] == 1
    assert their_view.context["totals"]["tokens"] == 0
    assert list(table(their_view, "latency")) == ["their-story · write"]
    assert list(table(mine, "latency")) == ["story · write"]
    assert web.get("/recipes/their-story/stats/").status_code == 404


# -- the actor's page ------------------------------------------------------------------------


def test_the_actor_page_shows_the_runs_it_took_part_in_its_usage_and_its_steps(
    web: Client, history: list[Run]
) -> None:
    forget_recorded_calls()
    call(history[0], tokens_in=3, tokens_out=4, cost=Decimal("0.25"), currency="EUR")
    call(history[0], actor_name="editor-judge", tokens_in=50, tokens_out=50)

    response = web.get("/actors/editor-writer/")

    assert response.status_code == 200
    assert response.context["actor"].name == "editor-writer"
    assert table(response, "runs_chart")[TODAY().isoformat()] == ("2", "1", "1", "4")
    assert table(response, "tokens_chart")[TODAY().isoformat()] == ("3", "4", "7")
    assert table(response, "cost_chart")[TODAY().isoformat()] == ("0.25",)
    assert "story · write" in table(response, "latency")
    assert ("story · write", "great", "2", "50%") in response.context["branches"].table.rows
    html = response.content.decode()
    for key in ("runs", "tokens", "cost", "latency-steps", "branches"):
        chart_svg(html, key)


def test_the_actor_page_says_what_its_tokens_cost_now(web: Client, story: Recipe) -> None:
    ActorFactory(
        name="priced",
        price_in_per_million=Decimal("2.5"),
        price_out_per_million=Decimal("10"),
        currency="EUR",
    )

    priced = web.get("/actors/priced/").content.decode()
    free = web.get("/actors/editor-writer/").content.decode()

    assert "2.50 in, 10.00 out per million tokens (EUR)" in priced
    assert "no prices" in free
    assert "No runs" not in priced and "No run in these days" in priced


def test_an_actor_name_is_escaped_wherever_the_page_shows_it(web: Client, story: Recipe) -> None:
    ActorFactory(name='<img src=x onerror="alert(1)">')

    response = web.get('/actors/<img src=x onerror="alert(1)">/')

    assert response.status_code == 200
    assert "<img src=x" not in response.content.decode()


# -- links -----------------------------------------------------------------------------------


def test_the_recipe_list_and_the_editor_link_to_the_stats(web: Client, story: Recipe) -> None:
    assert 'href="/recipes/story/stats/"' in web.get("/").content.decode()
    assert 'href="/recipes/story/stats/"' in web.get("/recipes/story/").content.decode()


def test_the_monitor_links_a_step_to_its_actor(web: Client, history: list[Run]) -> None:
    html = client_for(history[0].created_by).get(f"/runs/{history[0].pk}/").content.decode()

    assert 'href="/actors/editor-writer/"' in html
