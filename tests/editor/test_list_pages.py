"""The run list and the recipe list page by keyset cursor: "Older runs →" and
"Next →" go on after the last row shown, so rows added meanwhile neither repeat nor hide one."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from editor.views import recipes as recipe_views
from editor.views import runs as run_views
from runner.models import Run
from runner.services import run_start
from runner.status import RunStatus
from tests.editor.conftest import story_document
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.django_db

RUN_ROW = re.compile(r'data-run-status="(\d+)"')
RECIPE_ROW = re.compile(r"<td[^>]*><code>([^<]+)</code></td>")


def link(page: str, label: str) -> str | None:
    """Return the query string of the pager link with this label, or None."""
    found = re.search(rf'<a href="\?([^"]*)"[^>]*>{re.escape(label)}</a>', page)
    return html.unescape(found[1]) if found else None


def walk(
    client: Client,
    url: str,
    rows: re.Pattern[str],
    label: str,
    between: Callable[[], Any] = lambda: None,
) -> list[list[str]]:
    """Follow the `label` links from `url`; call `between` between pages."""
    pages = []
    response = client.get(url)
    while True:
        assert response.status_code == 200
        page = response.content.decode()
        pages.append(rows.findall(page))
        following = link(page, label)
        if following is None:
            return pages
        between()
        response = client.get(f"{urlsplit(url).path}?{following}")
        assert len(pages) < 100, "the walk does not end"


def flat(pages: list[list[str]]) -> list[str]:
    return [row for page in pages for row in page]


# --- the run list -------------------------------------------------------------------------------


@pytest.fixture
def three_a_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_views, "RUNS_PER_PAGE", 3)
    monkeypatch.setattr(recipe_views, "RECIPES_PER_PAGE", 3)


def start(author: Any, recipe: Recipe) -> str:
    return str(run_start(user=author, recipe=recipe, inputs={"topic": "owls"}).pk)


def newest_first() -> list[str]:
    return [
        str(pk) for pk in Run.objects.order_by("-created_at", "-pk").values_list("pk", flat=True)
    ]


def test_the_run_list_walks_every_run_once_newest_first(
    web: Client, author: Any, published: Recipe, three_a_page: None
) -> None:
    for _ in range(8):
        start(author, published)

    pages = walk(web, "/runs/", RUN_ROW, "Older runs →")

    assert [len(page) for page in pages] == [3, 3, 2]
    assert flat(pages) == newest_first()


def test_runs_started_while_reading_do_not_push_rows_onto_the_next_page(
    web: Client, author: Any, published: Recipe, three_a_page: None
) -> None:
    for _ in range(7):
        start(author, published)
    before = newest_first()

    pages = walk(web, "/runs/", RUN_ROW, "Older runs →", between=lambda: start(author, published))

    assert flat(pages) == before


def test_runs_of_one_moment_page_by_their_id(
    web: Client, author: Any, published: Recipe, three_a_page: None
) -> None:
    for _ in range(5):
        start(author, published)
    Run.objects.update(created_at=timezone.now())

    pages = walk(web, "/runs/", RUN_ROW, "Older runs →")

    assert flat(pages) == [
        str(pk) for pk in Run.objects.order_by("-pk").values_list("pk", flat=True)
    ]


def test_the_older_runs_link_keeps_the_filters(
    web: Client, author: Any, published: Recipe, three_a_page: None
) -> None:
    other = recipe_import(user=author, data=story_document(slug="other", name="Other")).recipe
    recipe_publish(recipe=other, user=author)
    mine = [start(author, published) for _ in range(5)]
    for _ in range(3):
        start(author, other)
    Run.objects.filter(pk=mine[0]).update(status=RunStatus.FAILED)

    first = web.get("/runs/?recipe=story&status=queued").content.decode()
    pages = walk(web, "/runs/?recipe=story&status=queued", RUN_ROW, "Older runs →")

    query = parse_qs(link(first, "Older runs →") or "")
    assert (query["recipe"], query["status"]) == (["story"], ["queued"])
    assert flat(pages) == mine[:0:-1]


def test_the_run_list_counts_its_runs_and_links_back_to_the_newest(
    web: Client, author: Any, published: Recipe, three_a_page: None
) -> None:
    for _ in range(4):
        start(author, published)

    first = web.get("/runs/?status=queued").content.decode()
    second = web.get(f"/runs/?{link(first, 'Older runs →')}").content.decode()

    assert "4 runs" in first and "4 runs" in second
    assert link(first, "← Newest runs") is None
    assert link(second, "← Newest runs") == "status=queued"
    assert link(second, "Older runs →") is None


def test_a_run_list_of_one_page_has_no_pager(
    web: Client, author: Any, published: Recipe, three_a_page: None
) -> None:
    for _ in range(3):
        start(author, published)

    page = web.get("/runs/").content.decode()

    assert 'class="pager"' not in page
    assert len(RUN_ROW.findall(page)) == 3


def test_a_later_page_renders_alone_for_htmx(
    web: Client, author: Any, published: Recipe, three_a_page: None
) -> None:
    for _ in range(5):
        start(author, published)
    following = link(web.get("/runs/").content.decode(), "Older runs →")

    table = web.get(f"/runs/?{following}", HTTP_HX_REQUEST="true").content.decode()

    assert table.lstrip().startswith('<div id="runs-table"')
    assert RUN_ROW.findall(table) == newest_first()[3:]


@pytest.mark.parametrize("cursor", ["", "nonsense", "W10", "WyJ4IiwgMV0"])
def test_a_bad_run_cursor_says_so_and_links_to_the_newest(
    web: Client, published: Recipe, cursor: str
) -> None:
    response = web.get(f"/runs/?status=queued&cursor={cursor}")

    page = response.content.decode()
    assert response.status_code == 400
    assert "This link does not name a place in the list of runs." in page
    assert link(page, "Show the newest runs") == "status=queued"


def test_an_old_page_number_shows_the_newest_runs(
    web: Client, author: Any, published: Recipe, three_a_page: None
) -> None:
    for _ in range(5):
        start(author, published)

    page = web.get("/runs/?page=2").content.decode()

    assert RUN_ROW.findall(page) == newest_first()[:3]
    assert "page=" not in (link(page, "Older runs →") or "")


# --- the recipe list ----------------------------------------------------------------------------


def add_recipe(author: Any, name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    recipe_import(user=author, data=story_document(slug=slug, name=name))
    return slug


def test_the_recipe_list_walks_every_recipe_once_by_name(
    web: Client, author: Any, story_actors: None, three_a_page: None
) -> None:
    names = ["Kilo", "Alpha", "Echo", "Bravo", "India", "Delta", "Golf"]
    for name in names:
        add_recipe(author, name)

    pages = walk(web, "/", RECIPE_ROW, "Next →")

    assert [len(page) for page in pages] == [3, 3, 1]
    assert flat(pages) == [name.lower() for name in sorted(names)]


def test_recipes_added_while_reading_neither_repeat_nor_hide_one(
    web: Client, author: Any, story_actors: None, three_a_page: None
) -> None:
    for name in ("Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel"):
        add_recipe(author, name)
    turns = iter([("Alpha", "Delta two"), ("Echo two", "Zulu")])

    def add_two() -> None:
        for name in next(turns):
            add_recipe(author, name)

    pages = walk(web, "/", RECIPE_ROW, "Next →", between=add_two)

    # Those added before the page read last (Alpha, Echo two) are not on the pages to come;
    # those after it are, where their name puts them; no row is pushed onto a page twice.
    assert pages == [
        ["bravo", "charlie", "delta"],
        ["delta-two", "echo", "foxtrot"],
        ["golf", "hotel", "zulu"],
    ]


def test_the_next_link_keeps_the_search(
    web: Client, author: Any, story_actors: None, three_a_page: None
) -> None:
    for name in ("Owl one", "Owl two", "Owl three", "Owl four", "Cat"):
        add_recipe(author, name)

    first = web.get("/?q=owl").content.decode()
    second = web.get(f"/?{link(first, 'Next →')}").content.decode()

    assert parse_qs(link(first, "Next →") or "")["q"] == ["owl"]
    assert RECIPE_ROW.findall(second) == ["owl-two"]
    assert link(second, "← First page") == "q=owl"
    assert link(second, "Next →") is None


def test_a_bad_recipe_cursor_says_so(web: Client, story: Recipe) -> None:
    response = web.get("/?q=story&cursor=nonsense")

    page = response.content.decode()
    assert response.status_code == 400
    assert "This link does not name a place in the list of recipes." in page
    assert link(page, "Show the first recipes") == "q=story"
    assert RECIPE_ROW.findall(page) == []
