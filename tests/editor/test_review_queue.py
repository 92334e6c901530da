"""The inbox as a review queue: list and detail, filters, sort, search, claims, due-date urgency
and the diff of a revised answer against the one reviewed before."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.html import escape

from editor.views.inbox import PAGE_SIZE, SNIPPET_CHARS, UNDO_SECONDS, snippet
from runner.models import HumanTask
from tests.editor.conftest import story_document
from tests.editor.test_runs_pages import client_for
from tests.factories import GroupFactory, UserFactory
from tests.runner.open_tasks import park_runs, review_again
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish


@pytest.fixture
def reviewer(reviewers: Group) -> Any:
    user = UserFactory(username="rita")
    user.groups.add(reviewers)
    return user


@pytest.fixture
def colleague(reviewers: Group) -> Any:
    user = UserFactory(username="carl")
    user.groups.add(reviewers)
    return user


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return client_for(reviewer)


@pytest.fixture
def tasks(published: Recipe, author: Any, reviewers: Group) -> list[HumanTask]:
    return park_runs(published, author, reviewers, 3)


def card_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<article class="task-card card" id="task-(\d+)"', html)]


def inbox(client: Client, **params: str) -> str:
    response = client.get("/inbox/", params)
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def claim(client: Client, task: HumanTask, action: str = "claim") -> Any:
    return client.post(f"/inbox/tasks/{task.pk}/claim/", {"action": action}, HTTP_HX_REQUEST="true")


# --- the layout --------------------------------------------------------------------------------


def test_the_inbox_has_a_list_a_detail_pane_filters_and_the_keys_help(
    rita: Client, tasks: list[HumanTask]
) -> None:
    html = inbox(rita)

    assert '<ol id="inbox-list" class="inbox-list">' in html
    assert '<div id="inbox-tasks" class="inbox-detail"' in html
    assert 'id="inbox-filters"' in html and 'role="search"' in html
    for key in ("j", "k", "a", "r", "v", "c", "/", "Esc", "m", "u"):
        assert f"<kbd>{key}</kbd>" in html
    # Each card carries the facts its row shows: the step's name, the run, a snippet.
    assert f'data-title="{tasks[0].run.recipe.name}: Review"' in html
    assert f'data-run="{tasks[0].run_id}"' in html
    assert 'data-group="editor-reviewers"' in html
    assert f'data-undo-ms="{UNDO_SECONDS * 1000}"' in html


def test_a_rows_snippet_is_the_start_of_the_material_on_one_line_and_escaped(
    rita: Client, reviewers: Group, published: Recipe, author: Any
) -> None:
    material = "<b>Draft</b>\n\n  " + "word " * 60
    park_runs(published, author, reviewers, 1, material=material)

    html = inbox(rita)

    shown = snippet(material)
    assert shown.startswith("<b>Draft</b> word word") and shown.endswith("…")
    assert len(shown) == SNIPPET_CHARS
    assert f'data-snippet="{escape(shown)}"' in html
    assert "<b>Draft</b>" not in html


# --- filters, sort and search ------------------------------------------------------------------


@pytest.fixture
def fables(author: Any, reviewers: Group) -> Recipe:
    recipe = recipe_import(
        user=author, data=story_document(slug="fables", name="Fables of the sea")
    ).recipe
    recipe_publish(recipe=recipe, user=author)
    return recipe


def test_the_filters_narrow_the_list_by_recipe_group_and_due_time(
    rita: Client, reviewer: Any, tasks: list[HumanTask], fables: Recipe, author: Any
) -> None:
    lawyers = GroupFactory(name="lawyers")
    reviewer.groups.add(lawyers)
    fable = park_runs(fables, author, lawyers, 1)[0]
    now = timezone.now()
    HumanTask.objects.filter(pk=tasks[0].pk).update(due_at=now - timedelta(minutes=5))
    HumanTask.objects.filter(pk=tasks[1].pk).update(due_at=now + timedelta(minutes=20))

    assert card_ids(inbox(rita, recipe="fables")) == [fable.pk]
    assert card_ids(inbox(rita, group="lawyers")) == [fable.pk]
    assert card_ids(inbox(rita, due="overdue")) == [tasks[0].pk]
    assert card_ids(inbox(rita, due="soon")) == [tasks[1].pk]
    assert card_ids(inbox(rita, due="none")) == [tasks[2].pk, fable.pk]
    html = inbox(rita, recipe="fables")
    assert '<strong id="inbox-matching">1</strong> matches this view' in html
    assert '<option value="fables" selected>Fables of the sea</option>' in html
    assert '<option value="lawyers">lawyers</option>' in html
    assert 'data-narrowed="true"' in html and 'data-from-oldest="false"' in html


def test_a_group_that_is_not_the_users_shows_nothing(
    rita: Client, tasks: list[HumanTask], author: Any
) -> None:
    others = GroupFactory(name="others")
    park_runs(tasks[0].run.recipe, author, others, 1)

    html = inbox(rita, group="others")

    assert card_ids(html) == []
    assert "No open task matches this view." in html


def test_the_search_reads_the_material_the_question_and_the_step(
    rita: Client, published: Recipe, author: Any, reviewers: Group
) -> None:
    whale = park_runs(published, author, reviewers, 1, material="A <b>whale</b> sang.")[0]
    park_runs(published, author, reviewers, 2)

    assert card_ids(inbox(rita, q="WHALE")) == [whale.pk]
    assert len(card_ids(inbox(rita, q="review"))) == 3  # the step key
    assert card_ids(inbox(rita, q="no such words")) == []
    assert '<input type="search" name="q" value="WHALE"' in inbox(rita, q="WHALE")


def test_the_sorts_order_the_list_and_due_lists_tasks_with_a_due_time(
    rita: Client, tasks: list[HumanTask]
) -> None:
    now = timezone.now()
    HumanTask.objects.filter(pk=tasks[0].pk).update(due_at=now + timedelta(hours=3))
    HumanTask.objects.filter(pk=tasks[2].pk).update(due_at=now + timedelta(hours=1))

    assert card_ids(inbox(rita)) == [t.pk for t in tasks]
    assert card_ids(inbox(rita, sort="newest")) == [t.pk for t in tasks][::-1]
    assert card_ids(inbox(rita, sort="due")) == [tasks[2].pk, tasks[0].pk]


def test_a_narrowed_view_pages_by_cursor_keeping_its_filters(
    rita: Client, published: Recipe, author: Any, reviewers: Group
) -> None:
    parked = park_runs(published, author, reviewers, PAGE_SIZE + 3)

    first = inbox(rita, sort="newest")
    more = re.search(r'id="inbox-more" class="button" href="\?([^"]*)"', first)
    assert more is not None
    query = more[1].replace("&amp;", "&")
    second = rita.get(f"/inbox/?{query}", HTTP_HX_REQUEST="true").content.decode()

    assert "sort=newest" in query
    assert card_ids(first) + card_ids(second) == [t.pk for t in parked][::-1]
    # The page's script learns from the partial whether more follow.
    assert '<template data-page-more="false"></template>' in second


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"due": "yesterday"}, "due: one of overdue, soon, later, none"),
        ({"sort": "random"}, "sort: one of oldest, newest, due"),
        ({"q": "x" * 201}, "q: at most 200 characters"),
    ],
)
def test_a_filter_the_inbox_cannot_read_is_refused_naming_it(
    rita: Client, tasks: list[HumanTask], params: dict[str, str], error: str
) -> None:
    response = rita.get("/inbox/", params)

    assert response.status_code == 400
    assert error in response.content.decode()
    assert card_ids(response.content.decode()) == []


# --- due-date urgency --------------------------------------------------------------------------


def test_overdue_and_soon_due_tasks_carry_badges(rita: Client, tasks: list[HumanTask]) -> None:
    now = timezone.now()
    HumanTask.objects.filter(pk=tasks[0].pk).update(due_at=now - timedelta(seconds=1))
    HumanTask.objects.filter(pk=tasks[1].pk).update(due_at=now + timedelta(minutes=59))
    HumanTask.objects.filter(pk=tasks[2].pk).update(due_at=now + timedelta(hours=2))

    html = inbox(rita)
    cards = re.split(r'(?=<article class="task-card card")', html)[1:]

    assert '<span class="badge due-overdue">Overdue</span>' in cards[0]
    assert '<span class="badge due-soon">Due soon</span>' in cards[1]
    assert "badge due-" not in cards[2]
    assert 'data-due-soon-ms="3600000"' in html


# --- claims ------------------------------------------------------------------------------------


def test_a_reviewer_claims_a_task_and_the_others_see_who_is_on_it(
    rita: Client, colleague: Any, tasks: list[HumanTask]
) -> None:
    response = claim(rita, tasks[0])

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<form class="claim"')
    assert "You are on it since" in html and ">Let go</button>" in html
    carl = client_for(colleague)
    assert "rita is on it since" in carl.get(f"/inbox/tasks/{tasks[0].pk}/claim/").content.decode()
    assert 'data-claimed-by="rita"' in inbox(carl)
    refused = claim(carl, tasks[0])
    assert refused.status_code == 409
    assert "rita is on this task since" in refused.content.decode()


def test_letting_go_offers_the_claim_again(rita: Client, tasks: list[HumanTask]) -> None:
    claim(rita, tasks[0])

    html = claim(rita, tasks[0], "unclaim").content.decode()

    assert "Nobody is on it yet." in html and ">Claim</button>" in html
    tasks[0].refresh_from_db()
    assert tasks[0].claimed_by is None


def test_a_claim_without_htmx_redirects_to_the_inbox(rita: Client, tasks: list[HumanTask]) -> None:
    response = rita.post(f"/inbox/tasks/{tasks[0].pk}/claim/", {"action": "claim"})

    assert response.status_code == 302 and response["Location"] == "/inbox/"
    tasks[0].refresh_from_db()
    assert tasks[0].claimed_by is not None


def test_a_claim_asks_for_a_known_action_and_a_reviewer_of_the_group(
    rita: Client, tasks: list[HumanTask]
) -> None:
    outsider = client_for(UserFactory(username="otto"))

    assert claim(rita, tasks[0], "steal").status_code == 400
    assert claim(outsider, tasks[0]).status_code == 404
    assert outsider.get(f"/inbox/tasks/{tasks[0].pk}/claim/").status_code == 404


# --- the diff of a revised answer --------------------------------------------------------------

BEFORE = "The storm knocked twice. It asked for tea."
AFTER = "The storm, Brann, knocked twice. It asked for <em>tea</em> and a chair."


def test_a_revised_answer_shows_a_word_diff_against_the_one_reviewed_before(
    rita: Client, published: Recipe, author: Any, reviewers: Group
) -> None:
    first = park_runs(published, author, reviewers, 1, material=BEFORE)[0]
    again = review_again(first, AFTER)
    untouched = park_runs(published, author, reviewers, 1)[0]

    html = inbox(rita)
    pieces = re.split(r'(?=<article class="task-card card")', html)[1:]
    cards = dict(zip(card_ids(html), pieces, strict=True))

    card = cards[again.pk]
    assert "Changed since the last review" in card
    assert f"Reviewed before as task {first.pk}" in card and "Name the storm." in card
    assert "<ins>, Brann,</ins>" in card or "<ins>, Brann</ins>" in card
    # Escaped: the answer's markup is text, inside the diff's own <ins>.
    assert "&lt;em&gt;tea&lt;/em&gt;" in card
    assert "<em>tea</em>" not in card
    assert 'data-revised="true"' in card
    assert "Changed since the last review" not in cards[untouched.pk]


def test_a_review_of_the_same_text_says_it_is_the_same(
    rita: Client, published: Recipe, author: Any, reviewers: Group
) -> None:
    first = park_runs(published, author, reviewers, 1, material=BEFORE)[0]
    review_again(first, BEFORE)

    html = inbox(rita)

    assert "The text is the same." in html
    assert "<ins>" not in html


def test_the_diff_costs_one_query_for_the_whole_page(
    rita: Client, published: Recipe, author: Any, reviewers: Group
) -> None:
    for task in park_runs(published, author, reviewers, 2, material=BEFORE):
        review_again(task, AFTER)
    rita.get("/inbox/")
    with CaptureQueriesContext(connection) as few:
        rita.get("/inbox/")
    for task in park_runs(published, author, reviewers, 6, material=BEFORE):
        review_again(task, AFTER)

    with CaptureQueriesContext(connection) as many:
        html = rita.get("/inbox/").content.decode()

    assert html.count("Changed since the last review") == 8
    assert len(many) == len(few)
