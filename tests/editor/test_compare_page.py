"""The comparison page (/runs/compare/?a=ID&b=ID) and picking two runs from the run list."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from editor.views.compare import merged_document
from runner.advance import advance
from runner.models import Run
from runner.services import run_start
from tests.editor.conftest import STORY, story_document
from workflows.models import Recipe


def start(user: Any, recipe: Recipe, **script: Any) -> Run:
    """Start a dry run and execute it here until it finishes."""
    run = run_start(user=user, recipe=recipe, inputs={"topic": "owls"}, script=script)
    advance(run.pk, time_slice=60)
    run.refresh_from_db()
    return run


@pytest.fixture
def approved(author: Any, published: Recipe) -> Run:
    """A run the judge approves at once: write → complete."""
    return start(author, published, writer=[STORY], judge=["9"])


@pytest.fixture
def reviewed(author: Any, published: Recipe) -> Run:
    """A run the judge sends to review, where the script approves: write → review → complete."""
    return start(author, published, writer=[STORY], judge=["5"], editors=["approve"])


def compare(client: Client, a: Run, b: Run) -> Any:
    return client.get(f"/runs/compare/?a={a.pk}&b={b.pk}")


def pair_rows(html: str) -> dict[str, str]:
    """Return each lined-up step's <tbody> by its row number (from 1)."""
    table = html[html.index('class="list compare-steps"') :]
    table = table[: table.index("</table>\n{{") if "</table>\n{{" in table else None]
    parts = table.split('<tbody id="pair-')[1:]
    return {str(int(part.split('"', 1)[0]) + 1): part for part in parts}


def test_the_page_needs_a_login(db: None) -> None:
    response = Client().get("/runs/compare/?a=1&b=2")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_it_lines_the_steps_up_and_marks_what_differs(
    web: Client, approved: Run, reviewed: Run
) -> None:
    response = compare(web, approved, reviewed)

    html = response.content.decode()
    assert response.status_code == 200
    rows = pair_rows(html)
    assert list(rows) == ["1", "2"]
    assert 'data-step="write" data-differs="true"' in rows["1"]
    assert "branch-changed" in rows["1"]
    assert "great" in rows["1"] and "to_review" in rows["1"]
    assert "only-b" in rows["2"] and "only in B" in rows["2"]
    assert "2 steps differ" in html
    assert 'The runs part at <a href="#pair-0">write</a>' in html
    assert "A took <strong>great</strong>, B took <strong>to_review</strong>" in html


def test_it_shows_the_evaluations_that_changed_with_their_reasons(
    web: Client, approved: Run, reviewed: Run
) -> None:
    html = compare(web, approved, reviewed).content.decode()

    write = pair_rows(html)["1"]
    table = write[write.index('class="list compact evaluation-changes"') :]
    assert 'data-branch="great"' in table
    assert 'data-branch="to_review"' in table
    assert "not evaluated" in table  # A stopped at its first match
    assert "judge scored 9" in table and "judge scored 5" in table


def test_answers_are_diffed_escaped_with_insertions_and_deletions_marked(
    web: Client, author: Any, published: Recipe
) -> None:
    a = start(author, published, writer=[STORY + " <b>The end.</b>"], judge=["9"])
    b = start(author, published, writer=[STORY + " <script>alert(1)</script>"], judge=["9"])

    html = compare(web, a, b).content.decode()

    write = pair_rows(html)["1"]
    answer = write[write.index("<summary>Answer</summary>") :]
    assert "&lt;<del>b</del><ins>script</ins>&gt;<del>The end.</del><ins>alert(1)</ins>" in answer
    assert "<script>alert" not in html


def test_identical_runs_are_said_to_be_identical(
    web: Client, author: Any, published: Recipe
) -> None:
    a = start(author, published, writer=[STORY], judge=["9"])
    b = start(author, published, writer=[STORY], judge=["9"])

    html = compare(web, a, b).content.decode()

    assert "The runs did the same" in html
    assert 'data-differs="true"' not in html
    assert "pair-details" not in html


def test_the_graph_gets_both_paths_and_where_they_part(
    web: Client, approved: Run, reviewed: Run
) -> None:
    response = compare(web, approved, reviewed)

    graph = response.context["graph"]
    assert graph["a"] == {
        "status": "succeeded",
        "path": [{"seq": 1, "step": "write", "branch": "great"}],
    }
    assert [p["step"] for p in graph["b"]["path"]] == ["write", "review"]
    assert graph["firstChange"] == {"step": "write", "a": "great", "b": "to_review"}
    assert graph["document"]["slug"] == "story"
    assert 'id="compare-config"' in response.content.decode()


def test_it_shows_the_run_deltas(web: Client, approved: Run, reviewed: Run) -> None:
    response = compare(web, approved, reviewed)

    rows = {row["label"]: row for row in response.context["rows"]}
    assert rows["Steps"] == {"label": "Steps", "a": 1, "b": 2, "delta": 1}
    assert rows["Model calls"]["delta"] == reviewed.model_calls - approved.model_calls
    assert '<td class="delta up" data-label="B \u2212 A">+1</td>' in response.content.decode()


def test_every_cell_of_the_step_table_names_its_column_for_a_phone(
    web: Client, approved: Run, reviewed: Run
) -> None:
    html = compare(web, approved, reviewed).content.decode()

    table = html[
        html.index('<table class="list compare-steps"') : html.index(
            "</table>", html.index("compare-steps")
        )
    ]
    row = table[
        table.index('<tr class="pair-row">') : table.index("</tr>", table.index("pair-row"))
    ]
    labels = re.findall(r'<td[^>]*data-label="([^"]*)"', row)
    assert labels == [
        "#",
        "Step",
        f"A, run #{approved.pk}",
        f"B, run #{reviewed.pk}",
        "What differs",
        "Δ latency",
        "Δ tokens (in / out)",
        "Δ cost",
    ]
    assert row.count("<td") == len(labels)


def test_the_swap_link_compares_the_other_way(web: Client, approved: Run, reviewed: Run) -> None:
    html = compare(web, approved, reviewed).content.decode()

    assert f'href="/runs/compare/?a={reviewed.pk}&amp;b={approved.pk}"' in html


def test_another_users_run_is_not_found(stranger_web: Client, approved: Run, reviewed: Run) -> None:
    assert compare(stranger_web, approved, reviewed).status_code == 404


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "Run A is missing."),
        ("a=1", "Run B is missing."),
        ("a=one&b=2", "Run A is not a run number: &#x27;one&#x27;."),
        ("a=1&b=-2", "Run B is not a run number: &#x27;-2&#x27;."),
        ("a=1&b=" + "9" * 30, "Run B is not a run number"),
        ("a=%3Cb%3E&b=1", "Run A is not a run number: &#x27;&lt;b&gt;&#x27;."),
    ],
)
def test_it_refuses_missing_or_bad_run_numbers(web: Client, query: str, message: str) -> None:
    response = web.get(f"/runs/compare/?{query}")

    assert response.status_code == 400
    assert message in response.content.decode()


# --- picking two runs in the run list --------------------------------------------------------


def test_the_run_list_offers_a_box_per_run_and_a_compare_button(
    web: Client, approved: Run, reviewed: Run
) -> None:
    html = web.get("/runs/").content.decode()

    assert '<form id="compare-runs" method="get" action="/runs/compare/"' in html
    for run in (approved, reviewed):
        assert f'name="run" value="{run.pk}" form="compare-runs"' in html


def test_the_boxes_stay_in_the_table_that_reloads_live(web: Client, approved: Run) -> None:
    html = web.get("/runs/", HTTP_HX_REQUEST="true").content.decode()

    assert f'name="run" value="{approved.pk}" form="compare-runs"' in html


def test_two_runs_ticked_in_the_list_open_their_comparison_older_first(
    web: Client, approved: Run, reviewed: Run
) -> None:
    response = web.get(f"/runs/compare/?run={reviewed.pk}&run={approved.pk}")

    assert response.status_code == 302
    assert response["Location"] == f"/runs/compare/?a={approved.pk}&b={reviewed.pk}"


@pytest.mark.parametrize("picked", [["1"], ["1", "2", "3"], ["1", "1"], ["1", "x"]])
def test_it_asks_for_exactly_two_runs_from_the_list(web: Client, picked: list[str]) -> None:
    query = "&".join(f"run={p}" for p in picked)

    response = web.get(f"/runs/compare/?{query}")

    assert response.status_code == 400
    assert "Select exactly two runs to compare" in response.content.decode()


# --- one graph for two versions --------------------------------------------------------------


def test_the_graph_document_holds_the_steps_and_branches_of_both_versions() -> None:
    old = story_document()
    new = story_document()
    new["steps"] = [new["steps"][0]]  # no review step
    new["steps"][0]["branches"] = [b for b in new["steps"][0]["branches"] if b["name"] != "great"]
    new["steps"][0]["branches"].append(
        {"name": "shiny", "priority": 5, "when": {"type": "default"}, "action": "CONTINUE"}
    )

    merged = merged_document(old, new)

    assert [s["key"] for s in merged["steps"]] == ["write", "review"]
    names = [b["name"] for b in merged["steps"][0]["branches"]]
    assert names == ["too_short", "broken", "to_review", "shiny", "great"]
    assert "position" not in merged["steps"][1]
    assert new["steps"][0]["branches"][-1]["name"] == "shiny"  # the inputs are left alone
    assert json.dumps(merged)  # still a plain document
