"""A recipe step's "what works" page: each actor and prompt variant's record on the step, the
learner's pick by that record with its evidence, its latest choices, and who may see it —
after real dry runs of the demo adaptive recipe with the scripted demo actors."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from editor import charts
from runner import advance, services
from runner.models import StepRun
from runner.status import RunStatus
from tests.runner.recipes import drive, publish_document
from workflows.demo import recipe_files
from workflows.demo.actors import DEMO_ACTORS
from workflows.models import Actor, Recipe

pytestmark = pytest.mark.django_db

URL = "/recipes/first-1000-primes/steps/deliver/works/"


def primes_document(**learning: Any) -> dict[str, Any]:
    """The demo adaptive recipe as shipped, with `learning` settings when given."""
    path = next(p for p in recipe_files() if p.name == "first-1000-primes.json")
    document = json.loads(path.read_text())
    if learning:
        document["learning"] = learning
    return document


@pytest.fixture
def demo_actors(db: None) -> None:
    """The scripted demo actors, answering at once."""
    for spec in DEMO_ACTORS:
        Actor.objects.create(**{**spec, "config": {**spec.get("config", {}), "delay_ms": 0}})


def dry_runs(owner: Any, recipe: Recipe, count: int) -> None:
    for _ in range(count):
        run = drive(services.run_start(user=owner, recipe=recipe, inputs={}))
        assert (run.status, run.outcome) == (RunStatus.SUCCEEDED, "approved")


def row(html: str, actor: str, variant: str = "") -> dict[str, str]:
    """Return the table row of an arm: its cells by column."""
    found = re.search(rf'<tr data-arm="{actor}\|{re.escape(variant)}"[^>]*>(.*?)</tr>', html, re.S)
    assert found, f"no row for {actor} {variant!r}"
    cells = re.findall(r'<td data-label="[^"]*" data-col="([^"]+)">([^<]*)</td>', found.group(1))
    return dict(cells)


def test_it_counts_each_actor_and_prompt_and_shows_the_learners_pick(
    author: Any, web: Client, demo_actors: None
) -> None:
    # Exploration off: the learner always takes the best rate, so the path is known. The
    # first run asks the coder (no evidence yet: the first candidate), who delivers code
    # twice (the second time with a sharper prompt, a suffix variant) before the retry asks
    # the mathematician; from then on the mathematician's record is the best.
    recipe = publish_document(author, primes_document(explore=False))
    dry_runs(author, recipe, 4)

    response = web.get(URL)

    assert response.status_code == 200
    html = response.content.decode()
    coder = row(html, "coder")
    assert (coder["attempts"], coder["successes"], coder["failures"]) == ("1", "0", "1")
    assert (coder["unjudged"], coder["success-rate"]) == ("0", "0%")
    # One failure, faded a little by the five judged attempts after it: 1 / (2 + 0.93).
    assert coder["weighted-rate"] == "34%"
    attempt = StepRun.objects.get(step_key="deliver", actor_alias="coder", variant="")
    assert coder["cost"] == charts.amount(float(attempt.cost))
    assert coder["latency"] == charts.duration_ms(attempt.latency_ms)
    mathematician = row(html, "mathematician")
    assert (mathematician["attempts"], mathematician["successes"]) == ("4", "4")
    assert (mathematician["failures"], mathematician["success-rate"]) == ("0", "100%")
    # The variant nobody was asked with is listed, with no evidence (the learner's 50%).
    assert row(html, "coder", "numbers only")["attempts"] == "0"
    assert row(html, "mathematician", "numbers only")["weighted-rate"] == "50%"
    # The sharper prompt the coder was asked with failed: it is not a variant offered now.
    suffixed = "+ Deliver the numbers themselves, not code that computes them."
    assert row(html, "coder", suffixed)["failures"] == "1"
    assert "not offered now" in html

    works = response.context["works"]
    assert (works.pick.arm.actor, works.pick.arm.variant) == ("mathematician", "")
    assert re.search(r'<tr data-arm="mathematician\|" data-picked>', html)
    pick = re.search(r'id="learner-pick".*?</section>', html, re.S)
    assert pick and "<strong data-pick>mathematician · own prompt</strong>" in pick.group(0)
    assert "4 of 4 judged attempts succeeded" in pick.group(0)
    assert "Exploration is <strong>off</strong>" in pick.group(0)
    # The chart draws both rates, with the numbers as text too.
    chart = response.context["chart"]
    assert chart.table.head[:3] == ("Actor · prompt", "success rate", "learner's weighted rate")
    assert "mathematician · own prompt · success rate: 100%</title>" in html
    assert ">100%</text>" in html


def test_it_lists_the_learners_latest_choices_with_their_reasons(
    author: Any, web: Client, demo_actors: None
) -> None:
    recipe = publish_document(author, primes_document(explore=False))
    dry_runs(author, recipe, 2)
    chosen = StepRun.objects.filter(step_key="deliver", choice__isnull=False).order_by("-pk")

    html = web.get(URL).content.decode()

    section = re.search(r'id="learner-choices".*?</section>', html, re.S)
    assert section
    runs = re.findall(r'<a href="/runs/(\d+)/#step-\d+">', section.group(0))
    assert [int(r) for r in runs] == [s.run_id for s in chosen]
    # The second run's first attempt, chosen by the best rate; the first run's retry.
    assert chosen[0].choice["reason"] in section.group(0)
    assert "best success rate" in section.group(0)
    # Each chosen attempt as the learner counts it: the coder's code, then two lists approved.
    counted = re.findall(r'<span class="badge (?:succeeded|failed)">(\w+)</span>', section.group(0))
    assert counted == ["success", "success", "failure"]


def test_with_exploration_on_the_demo_learns_to_ask_the_mathematician(
    author: Any, web: Client, demo_actors: None
) -> None:
    recipe = publish_document(author, primes_document())
    dry_runs(author, recipe, 8)
    deliveries = StepRun.objects.filter(step_key="deliver")

    response = web.get(URL)

    works = response.context["works"]
    assert works.pick.arm.actor == "mathematician"
    by_actor = {a: [r for r in works.arms if r.actor == a] for a in ("coder", "mathematician")}
    # Every attempt is counted once, and judged as the learner judges it.
    assert works.attempts == deliveries.count()
    assert (
        sum(r.attempts for r in by_actor["coder"]) == deliveries.filter(actor_alias="coder").count()
    )
    assert all(r.successes == 0 for r in by_actor["coder"])
    assert all(r.failures == 0 for r in by_actor["mathematician"])
    assert sum(r.successes for r in by_actor["mathematician"]) == 8
    html = response.content.decode()
    assert "Exploration is <strong>on</strong>" in html
    assert "Thompson sampling" in html or "gathering evidence" in html


def test_attempts_of_runs_still_going_are_counted_apart(
    author: Any, web: Client, demo_actors: None
) -> None:
    document = primes_document(explore=False)
    [deliver] = [s for s in document["steps"] if s["key"] == "deliver"]
    [short] = [b for b in deliver["branches"] if b["name"] == "too_few_numbers"]
    short["counts_as"] = "neutral"
    recipe = publish_document(author, document)
    dry_runs(author, recipe, 1)
    # A run stopped after its delivery: the mathematician's short list is asked for more
    # (here neither a success nor a failure), and the run has no outcome yet.
    script = {"mathematician": ["2, 3, 5", "2, 3, 5, 7"]}
    run = services.run_start(user=author, recipe=recipe, inputs={}, script=script)
    for _ in range(10):
        drive_one(run)
        if StepRun.objects.filter(run=run, step_key="deliver").exists():
            break

    html = web.get(URL).content.decode()

    assert row(html, "mathematician")["unjudged"] == "1"
    assert "1 attempt not judged yet" in html


def drive_one(run: Any) -> None:
    """Execute the run's next step only."""
    advance.advance(run.pk, time_slice=0)


def test_a_step_that_never_ran_says_so(author: Any, web: Client, demo_actors: None) -> None:
    publish_document(author, primes_document())

    response = web.get(URL)

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="works-empty"' in html
    assert "No attempts yet" in html
    assert 'id="learner-pick"' not in html


def test_the_recipe_stats_page_links_to_each_llm_steps_page(
    author: Any, web: Client, demo_actors: None
) -> None:
    publish_document(author, primes_document())

    html = web.get("/recipes/first-1000-primes/stats/").content.decode()

    links = re.search(r'<nav aria-label="What works on each step".*?</nav>', html, re.S)
    assert links
    assert re.findall(
        r'href="/recipes/first-1000-primes/steps/([\w-]+)/works/"', links.group(0)
    ) == ["deliver"]


def test_another_user_gets_404(author: Any, stranger_web: Client, demo_actors: None) -> None:
    recipe = publish_document(author, primes_document())
    dry_runs(author, recipe, 1)

    assert stranger_web.get(URL).status_code == 404


def test_it_needs_a_login(author: Any, demo_actors: None) -> None:
    publish_document(author, primes_document())

    response = Client().get(URL)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_an_unknown_step_is_404_with_a_clear_message(
    author: Any, web: Client, demo_actors: None
) -> None:
    publish_document(author, primes_document())

    response = web.get("/recipes/first-1000-primes/steps/no_such_step/works/")

    assert response.status_code == 404
    html = response.content.decode()
    assert "The recipe &#x27;first-1000-primes&#x27; has no step &#x27;no_such_step&#x27;." in html
    # It names the steps that have a page.
    assert 'href="/recipes/first-1000-primes/steps/deliver/works/"' in html


def test_a_step_without_actors_to_compare_is_404_with_a_clear_message(
    web: Client, story: Recipe
) -> None:
    # The story recipe is a draft only: the page reads the draft.
    response = web.get("/recipes/story/steps/review/works/")

    assert response.status_code == 404
    assert (
        "The step &#x27;review&#x27; is a human step: only LLM steps have actors and prompt "
        "variants to compare." in response.content.decode()
    )
    assert web.get("/recipes/story/steps/write/works/").status_code == 200
