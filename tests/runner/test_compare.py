"""Comparing two runs: the paths lined up by step key, text diffs, changed evaluations, deltas;
and the API that serves it (`GET /api/runs/compare?a=ID&b=ID`)."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from runner import compare
from runner.advance import advance
from runner.compare import MAX_DIFF_CHARS, Segment, compare_runs, text_diff
from runner.models import Run, StepRun
from runner.services import run_start
from runner.status import RunStatus
from tests.conftest import api_client
from tests.factories import ActorFactory, UserFactory
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

CHECKER_PRICE = Decimal("2")  # per million tokens, in and out


def pipeline_document(slug: str = "pipeline") -> dict[str, Any]:
    """Return a recipe whose path forks after `check` and joins again at `publish`."""
    return {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": "Pipeline",
        "inputs": {"topic": {"type": "string", "required": True}},
        "actors": {"writer": "cmp-writer", "checker": "cmp-checker", "editor": "cmp-writer"},
        "steps": [
            {
                "key": "draft",
                "name": "Draft",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Draft a note about {topic}",
                "branches": [
                    {
                        "name": "next",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "check",
                    }
                ],
            },
            {
                "key": "check",
                "name": "Check",
                "kind": "llm",
                "actor": "checker",
                "prompt": "Is this note fine? Say yes or no.",
                "branches": [
                    {
                        "name": "fine",
                        "priority": 1,
                        "when": {"type": "pattern_match", "operator": "contains", "value": "yes"},
                        "action": "CONTINUE",
                        "target": "publish",
                    },
                    {
                        "name": "not_fine",
                        "priority": 2,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "publish",
                    },
                ],
            },
            {
                "key": "publish",
                "name": "Publish",
                "kind": "llm",
                "actor": "editor",
                "prompt": "Publish the note about {topic}",
                "branches": [
                    {
                        "name": "done",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "@complete",
                    }
                ],
            },
        ],
    }


@pytest.fixture
def owner(db: None) -> Any:
    return UserFactory(username="olivia")


@pytest.fixture
def pipeline(owner: Any) -> Recipe:
    ActorFactory(name="cmp-writer", config={"replies": ["A short note."]})
    ActorFactory(
        name="cmp-checker",
        config={"replies": ["yes"]},
        price_in_per_million=CHECKER_PRICE,
        price_out_per_million=CHECKER_PRICE,
    )
    recipe = recipe_import(user=owner, data=pipeline_document()).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def finished_run(user: Any, recipe: Recipe, topic: str = "owls", **script: list[str]) -> Run:
    """Start a dry run and execute it here to its end."""
    run = run_start(user=user, recipe=recipe, inputs={"topic": topic}, script=script or None)
    advance(run.pk, time_slice=60)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    return run


def step(run: Run, key: str) -> StepRun:
    return run.steps.get(step_key=key)


# --- two runs of one recipe ------------------------------------------------------------------


def test_it_lists_exactly_the_step_whose_answer_differs(owner: Any, pipeline: Recipe) -> None:
    a = finished_run(owner, pipeline, checker=["yes, it is fine"])
    b = finished_run(owner, pipeline, checker=["no, too vague and far too long"])

    comparison = compare_runs(a, b)

    assert [p.step_key for p in comparison.steps] == ["draft", "check", "publish"]
    assert [p.step_key for p in comparison.differing] == ["check"]
    check = comparison.steps[1]
    assert check.changes == ("response", "evaluations")
    assert comparison.first_difference is check
    assert comparison.first_branch_change is check
    assert not comparison.identical
    assert comparison.run_changes == ("script",)


def test_it_says_which_branch_each_run_took_and_which_evaluations_changed(
    owner: Any, pipeline: Recipe
) -> None:
    a = finished_run(owner, pipeline, checker=["yes"])
    b = finished_run(owner, pipeline, checker=["no"])

    check = compare_runs(a, b).steps[1]

    assert (check.a_branch, check.b_branch) == ("fine", "not_fine")
    assert check.branch_changed
    changed = {e.branch: e for e in check.evaluations}
    assert set(changed) == {"fine", "not_fine"}
    assert changed["fine"].a is not None and changed["fine"].a.taken
    assert changed["fine"].b is not None and not changed["fine"].b.matched
    assert "matched" in changed["fine"].changes and "taken" in changed["fine"].changes
    # The first match wins: A never evaluated the default.
    assert changed["not_fine"].a is None
    assert changed["not_fine"].changes == ("branch",)
    assert check.response.segments == (Segment("delete", "yes"), Segment("insert", "no"))


def test_it_gives_the_deltas_of_each_step_and_of_the_runs(owner: Any, pipeline: Recipe) -> None:
    a = finished_run(owner, pipeline, checker=["yes"])
    b = finished_run(owner, pipeline, checker=["no, " + "far too long " * 30])

    comparison = compare_runs(a, b)

    check = comparison.steps[1]
    a_check, b_check = step(a, "check"), step(b, "check")
    assert b_check.tokens_out is not None and a_check.tokens_out is not None
    assert check.deltas.tokens_out == b_check.tokens_out - a_check.tokens_out > 0
    assert check.deltas.tokens_in == 0
    assert check.deltas.cost == b_check.cost - a_check.cost > 0  # type: ignore[operator]
    assert check.deltas.latency_ms == b_check.latency_ms - a_check.latency_ms  # type: ignore[operator]
    draft = comparison.steps[0]
    assert draft.deltas.tokens_out == 0
    assert draft.deltas.cost is None  # the writer has no prices: no cost in either run
    assert not draft.differs  # measures are not behaviour
    assert comparison.deltas.tokens_out == b.tokens_out - a.tokens_out
    assert comparison.deltas.cost == b.cost - a.cost > 0
    assert comparison.deltas.model_calls == 0
    assert comparison.deltas.steps == 0


def test_two_runs_of_one_script_differ_in_nothing(owner: Any, pipeline: Recipe) -> None:
    a = finished_run(owner, pipeline, checker=["yes"])
    b = finished_run(owner, pipeline, checker=["yes"])

    comparison = compare_runs(a, b)

    assert comparison.identical
    assert comparison.differing == ()
    assert comparison.first_difference is None
    assert comparison.first_branch_change is None
    assert comparison.run_changes == ()
    assert all(p.prompt.segments == (Segment("equal", p.a.prompt),) for p in comparison.steps)  # type: ignore[union-attr]


def test_a_run_compared_with_itself_is_identical(owner: Any, pipeline: Recipe) -> None:
    run = finished_run(owner, pipeline)

    assert compare_runs(run, run).identical


def test_a_changed_input_shows_in_the_prompts_that_use_it(owner: Any, pipeline: Recipe) -> None:
    a = finished_run(owner, pipeline, topic="owls")
    b = finished_run(owner, pipeline, topic="bats")

    comparison = compare_runs(a, b)

    assert [p.step_key for p in comparison.differing] == ["draft", "publish"]
    assert comparison.steps[0].changes == ("prompt",)
    assert comparison.steps[0].prompt.segments == (
        Segment("equal", "Draft a note about "),
        Segment("delete", "owls"),
        Segment("insert", "bats"),
    )
    assert comparison.run_changes == ("inputs",)
    assert comparison.first_branch_change is None


# --- paths that do not match -----------------------------------------------------------------


def looping_document() -> dict[str, Any]:
    """Return the pipeline with `check` sending a "no" back to `draft`, twice at most."""
    doc = pipeline_document(slug="looping")
    doc["steps"][1]["branches"][1] = {
        "name": "redo",
        "priority": 2,
        "when": {"type": "pattern_match", "operator": "contains", "value": "no"},
        "action": "CONTINUE",
        "target": "draft",
    }
    doc["steps"][1]["branches"].append(
        {
            "name": "give_up",
            "priority": 3,
            "when": {"type": "default"},
            "action": "CONTINUE",
            "target": "publish",
        }
    )
    return doc


def test_a_step_one_run_went_through_more_often_is_shown_on_its_side_only(
    owner: Any, pipeline: Recipe
) -> None:
    looping = recipe_import(user=owner, data=looping_document()).recipe
    recipe_publish(recipe=looping, user=owner)
    a = finished_run(owner, looping, checker=["yes"])
    b = finished_run(owner, looping, checker=["no", "yes"])

    comparison = compare_runs(a, b)

    lined = [(p.step_key, p.only) for p in comparison.steps]
    assert lined == [
        ("draft", None),
        ("check", None),
        ("draft", "b"),
        ("check", "b"),
        ("publish", None),
    ]
    assert [p.index for p in comparison.differing] == [1, 2, 3]
    assert comparison.steps[2].changes == ("step",)
    assert comparison.steps[2].a is None and comparison.steps[2].b is not None
    assert comparison.steps[2].b.seq == 3
    assert (comparison.steps[1].a_branch, comparison.steps[1].b_branch) == ("fine", "redo")
    assert comparison.deltas.steps == 2
    assert not comparison.steps[4].differs


def test_runs_of_different_versions_and_recipes_still_compare_by_step_key(
    owner: Any, pipeline: Recipe
) -> None:
    a = finished_run(owner, pipeline)
    # Version 2 of the recipe renames `check` to `review`.
    doc = pipeline_document()
    doc["steps"][0]["branches"][0]["target"] = "review"
    doc["steps"][1]["key"] = "review"
    recipe_import(user=owner, data=doc, replace=True)
    recipe_publish(recipe=pipeline, user=owner)
    b = finished_run(owner, pipeline)
    other_doc = copy.deepcopy(pipeline_document(slug="other"))
    other = recipe_import(user=owner, data=other_doc).recipe
    recipe_publish(recipe=other, user=owner)
    c = finished_run(owner, other)

    versions = compare_runs(a, b)
    recipes = compare_runs(a, c)

    assert b.version_id != a.version_id
    assert [(p.step_key, p.only) for p in versions.steps] == [
        ("draft", None),
        ("check", "a"),
        ("review", "b"),
        ("publish", None),
    ]
    assert [p.step_key for p in versions.differing] == ["check", "review"]
    assert versions.run_changes == ("version",)
    assert recipes.differing == ()
    assert recipes.run_changes == ("recipe", "version")


# --- text diffs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "segments"),
    [
        ("same", "same", [("equal", "same")]),
        ("", "", []),
        ("", "new", [("insert", "new")]),
        ("old", "", [("delete", "old")]),
        (
            "The cat sat on the mat.",
            "The car sat on the mat.",
            [
                ("equal", "The "),
                ("delete", "cat"),
                ("insert", "car"),
                ("equal", " sat on the mat."),
            ],
        ),
        ("one two three", "one three", [("equal", "one "), ("delete", "two "), ("equal", "three")]),
        ("<b>bold</b>", "<i>bold</i>", [("equal", "<"), ("delete", "b"), ("insert", "i")]),
    ],
)
def test_it_diffs_texts_word_by_word(a: str, b: str, segments: list[tuple[str, str]]) -> None:
    diff = text_diff(a, b)

    got = [(s.op, s.text) for s in diff.segments]
    assert got[: len(segments)] == segments
    assert diff.changed is (a != b)
    assert "".join(s.text for s in diff.segments if s.op != "insert") == a
    assert "".join(s.text for s in diff.segments if s.op != "delete") == b


def test_it_diffs_huge_texts_only_up_to_a_bound_but_tells_a_change_past_it() -> None:
    a = "word " * 100_000
    b = a + "one more"

    diff = text_diff(a, b)

    assert diff.changed and diff.truncated
    assert sum(len(s.text) for s in diff.segments) <= MAX_DIFF_CHARS
    assert {s.op for s in diff.segments} == {"equal"}  # the change is past what is shown


def test_it_shows_a_long_wholly_changed_text_whole_instead_of_diffing_it_slowly() -> None:
    a = "\n".join(f"line {i}" for i in range(3_000))
    b = "\n".join(f"row {i}" for i in range(3_000))

    diff = text_diff(a, b)

    assert [s.op for s in diff.segments][-2:] == ["delete", "insert"]
    assert diff.truncated


def test_a_comparison_stops_diffing_word_by_word_once_its_budget_is_spent() -> None:
    budget = compare._Budget(10)
    a, b = "alpha beta gamma delta", "alpha beta gamma epsilon omega"

    first = text_diff("one two", "one three", budget=budget)
    second = text_diff(a, b, budget=budget)

    assert [s.op for s in first.segments] == ["equal", "delete", "insert"]
    assert second.changed
    assert "".join(s.text for s in second.segments if s.op != "insert") == a


# --- the API ---------------------------------------------------------------------------------


@pytest.fixture
def owner_api(owner: Any) -> APIClient:
    return api_client(owner)


def test_the_api_compares_two_runs(owner_api: APIClient, owner: Any, pipeline: Recipe) -> None:
    a = finished_run(owner, pipeline, checker=["yes"])
    b = finished_run(owner, pipeline, checker=["no"])

    response = owner_api.get(f"/api/runs/compare?a={a.pk}&b={b.pk}")

    assert response.status_code == 200
    body = response.json()
    assert (body["a"]["id"], body["b"]["id"]) == (a.pk, b.pk)
    assert body["differing"] == [1]
    assert body["first_difference"] == 1
    assert body["first_branch_change"] == 1
    assert body["identical"] is False
    check = body["steps"][1]
    assert check["step"] == "check"
    assert check["changes"] == ["response", "evaluations"]
    assert (check["a"]["branch"], check["b"]["branch"]) == ("fine", "not_fine")
    assert check["response"]["segments"] == [
        {"op": "delete", "text": "yes"},
        {"op": "insert", "text": "no"},
    ]
    assert {e["branch"] for e in check["evaluations"]} == {"fine", "not_fine"}
    assert Decimal(body["deltas"]["cost"]) == b.cost - a.cost
    assert body["steps"][0]["only"] is None and body["steps"][0]["differs"] is False


def test_the_api_shows_a_step_of_one_run_only_with_an_empty_side(
    owner_api: APIClient, owner: Any, pipeline: Recipe
) -> None:
    looping = recipe_import(user=owner, data=looping_document()).recipe
    recipe_publish(recipe=looping, user=owner)
    a = finished_run(owner, looping, checker=["yes"])
    b = finished_run(owner, looping, checker=["no", "yes"])

    body = owner_api.get(f"/api/runs/compare/?a={a.pk}&b={b.pk}").json()

    extra = body["steps"][2]
    assert (extra["only"], extra["a"], extra["changes"]) == ("b", None, ["step"])
    assert extra["b"]["seq"] == 3
    assert extra["evaluations"] == []


def test_the_api_needs_a_login(anon_api: APIClient, owner: Any, pipeline: Recipe) -> None:
    run = finished_run(owner, pipeline)

    response = anon_api.get(f"/api/runs/compare?a={run.pk}&b={run.pk}")

    assert response.status_code in (401, 403)


def test_another_users_run_is_not_found(owner: Any, pipeline: Recipe) -> None:
    mine = finished_run(owner, pipeline)
    client = api_client(UserFactory(username="mallory"))

    for query in (f"a={mine.pk}&b={mine.pk}", f"a={mine.pk}&b=999999"):
        response = client.get(f"/api/runs/compare?{query}")

        assert response.status_code == 404, query
        assert response.json() == {"detail": f"No run {mine.pk}."}


@pytest.mark.parametrize(
    ("query", "errors"),
    [
        ("", ["a: required: the id of a run", "b: required: the id of a run"]),
        ("a=1", ["b: required: the id of a run"]),
        ("a=x&b=1", ["a: the id of a run: a whole number"]),
        ("a=1&b=-2", ["b: the id of a run: a whole number"]),
        ("a=1&b=1.5", ["b: the id of a run: a whole number"]),
        ("a=1&b=" + "9" * 19, ["b: the id of a run: a whole number"]),
        ("a=²&b=1", ["a: the id of a run: a whole number"]),
        ("a=&b=1", ["a: the id of a run: a whole number"]),
    ],
)
def test_the_api_refuses_missing_or_bad_run_ids(
    owner_api: APIClient, query: str, errors: list[str]
) -> None:
    response = owner_api.get(f"/api/runs/compare?{query}")

    assert response.status_code == 400
    assert response.json()["errors"] == errors


def test_the_compare_endpoint_is_in_the_schema(owner_api: APIClient) -> None:
    schema = owner_api.get("/api/schema/?format=json").json()

    operation = schema["paths"]["/api/runs/compare/"]["get"]
    names = {p["name"]: p for p in operation["parameters"]}
    assert names["a"]["required"] and names["b"]["required"]
    assert {"200", "400", "403", "404"} <= set(operation["responses"])
