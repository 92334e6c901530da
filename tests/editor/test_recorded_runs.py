"""Real runs saved as recipe tests, replayed against the draft, and `manage.py test_recipes`."""

from __future__ import annotations

import base64
import copy
import json
import xml.etree.ElementTree as ET
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse

from editor.models import RecipeTest
from editor.recording import RunNotRecordable, judge_verdict
from editor.replay import DIFFERS, SAME
from editor.services import (
    recipe_test_from_run,
    recipe_test_run_here,
    recipe_test_script,
    recipe_tests_replay,
)
from runner.advance import advance
from runner.human import task_decide
from runner.models import HumanTask, Run
from runner.services import run_cancel, run_start
from runner.status import RunStatus
from runner.versions import version_graph
from tests.documents import VALID_CARD, pdf
from tests.factories import ActorFactory, UserFactory
from tests.runner.test_document_reading import run_on
from workflows import engine
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish, recipe_update

from .conftest import STORY

ANSWER = "Your invoice is attached to the email we sent you on Monday morning."
VERDICT = json.dumps(
    {"relevance": 20, "helpfulness": 20, "accuracy": 20, "completeness": 20, "feedback": "Cite it."}
)

SUPPORT: dict[str, Any] = {
    "format": "branchline.recipe/v1",
    "slug": "support",
    "name": "Support with review",
    "inputs": {"message": {"type": "string", "required": True}},
    "actors": {
        "classifier": "rec-classifier",
        "writer": "rec-writer",
        "judge": "rec-judge",
        "editors": "@human:editor-reviewers",
    },
    "steps": [
        {
            "key": "triage",
            "name": "Triage",
            "kind": "classify",
            "actor": "classifier",
            "prompt": "{message}",
            "routes": [
                {"name": "billing", "instructions": "Invoices and payments."},
                {"name": "outage", "instructions": "The service is down."},
            ],
            "branches": [
                {
                    "name": "to_billing",
                    "priority": 1,
                    "when": {"type": "route_selected", "operator": "includes", "value": "billing"},
                    "action": "CONTINUE",
                    "target": "answer",
                },
                {
                    "name": "unsure",
                    "priority": 2,
                    "when": {"type": "default"},
                    "action": "END_RECIPE",
                    "target": "@end",
                },
            ],
        },
        {
            "key": "answer",
            "name": "Answer",
            "kind": "llm",
            "actor": "writer",
            "prompt": "Answer the customer: {message}",
            "validation": {"threshold": 0.7, "max_attempts": 3, "judge": "judge", "fallback": "-"},
            "branches": [
                {
                    "name": "good",
                    "priority": 1,
                    "when": {
                        "type": "ai_evaluation",
                        "operator": "greater_equal",
                        "value": 7,
                        "evaluator": "judge",
                        "prompt": "Rate the answer 1-10",
                    },
                    "action": "HUMAN_REVIEW",
                    "target": "review",
                },
                {
                    "name": "give_up",
                    "priority": 2,
                    "when": {"type": "default"},
                    "action": "END_RECIPE",
                    "target": "@end",
                },
            ],
        },
        {
            "key": "review",
            "name": "Review",
            "kind": "human",
            "actor": "editors",
            "prompt": "Send this? {steps.answer.response}",
            "branches": [
                {
                    "name": "approved",
                    "priority": 1,
                    "when": {
                        "type": "human_decision",
                        "operator": "user_choice",
                        "value": "approve",
                    },
                    "action": "QUALITY_APPROVED",
                    "target": "@complete",
                },
                {
                    "name": "not_approved",
                    "priority": 2,
                    "when": {"type": "default"},
                    "action": "END_RECIPE",
                    "target": "@end",
                },
            ],
        },
    ],
}


@pytest.fixture
def support_actors(db: None, reviewers: Group) -> None:
    ActorFactory(
        name="rec-classifier",
        config={
            "rules": [
                {"match": "route 'billing'", "reply": '{"selected": true, "reason": "bills"}'}
            ],
            "replies": ["no"],
        },
    )
    # The first answer is too short for the validation loop; the second passes it.
    ActorFactory(name="rec-writer", config={"replies": ["meh", ANSWER]})
    ActorFactory(
        name="rec-judge",
        config={"rules": [{"match": "four criteria", "reply": VERDICT}], "replies": ["Score: 8"]},
    )


@pytest.fixture
def support(author: Any, support_actors: None) -> Recipe:
    recipe = recipe_import(user=author, data=copy.deepcopy(SUPPORT)).recipe
    recipe_publish(recipe=recipe, user=author)
    return recipe


@pytest.fixture
def reviewer(reviewers: Group, support: Recipe) -> Any:
    user = UserFactory(username="rita")
    user.groups.add(reviewers)
    return user


def run_here(run: Run) -> Run:
    """Execute the run's steps in this process until it waits or finishes."""
    advance(run.pk, time_slice=60)
    run.refresh_from_db()
    return run


def real_run(author: Any, recipe: Recipe, reviewer: Any, decision: str = "approve") -> Run:
    """Run the support recipe for real (its actors answer), with a reviewer's decision."""
    run = run_here(run_start(user=author, recipe=recipe, inputs={"message": "Where's my bill?"}))
    assert run.status == RunStatus.WAITING_HUMAN
    task = HumanTask.objects.get(run=run)
    task_decide(task_id=task.pk, user=reviewer, decision=decision, comment="Looks right")
    return run_here(run)


def change_draft(recipe: Recipe, change: Any) -> None:
    document = document_from_recipe(recipe)
    change(document)
    recipe_update(recipe=recipe, document=document)


# --- recording ------------------------------------------------------------------------------


def test_it_records_every_answer_of_a_real_run_as_the_script(
    support: Recipe, author: Any, reviewer: Any
) -> None:
    run = real_run(author, support, reviewer)
    assert run.status == RunStatus.SUCCEEDED

    test = recipe_test_from_run(run=run, user=author)

    assert test.name == f"Run #{run.pk}"
    assert test.source_run == run
    assert test.inputs == {"message": "Where's my bill?"}
    assert test.expected_path == ["triage", "answer", "review"]
    assert test.expected_status == "succeeded"
    assert test.script["classifier"] == [
        '{"selected": true, "reason": "bills"}',
        '{"selected": false}',
    ]
    assert test.script["writer"] == ["meh", ANSWER]
    assert test.script["judge"][-1] == "Score: 8"
    assert len(test.script["judge"]) == 3  # two validation verdicts, then the evaluation
    assert test.script["editors"] == ["approve: Looks right"]


def test_a_recorded_judge_verdict_scores_the_attempt_as_it_was_scored() -> None:
    attempt = {"response": "meh", "rule_score": 1 / 3, "confidence": 0.66, "feedback": "Cite it."}

    scores = engine.parse_judge_answer(judge_verdict(attempt))

    assert engine.confidence(1 / 3, scores) == pytest.approx(0.66)
    assert scores.feedback == "Cite it."
    with pytest.raises(engine.AnswerUnreadable):
        engine.parse_judge_answer(judge_verdict({**attempt, "feedback": None}))


def test_a_saved_run_passes_when_replayed_on_the_unchanged_recipe(
    support: Recipe, author: Any, reviewer: Any
) -> None:
    test = recipe_test_from_run(run=real_run(author, support, reviewer), user=author)

    report = recipe_tests_replay(recipe=support, user=author)
    recipe_test_run_here(test=test, user=author)

    assert [r.verdict for r in report.results] == [SAME]
    assert report.results[0].path == ["triage", "answer", "review"]
    assert report.results[0].run is not None and report.results[0].run.script is not None
    assert report.version_label == "draft"
    test.refresh_from_db()
    assert (test.last_result, test.last_message) == ("passed", "")
    assert ["answer", "good"] in test.last_taken


def test_a_replay_on_a_changed_draft_reports_the_first_differing_branch_and_its_reason(
    support: Recipe, author: Any, reviewer: Any
) -> None:
    recipe_test_from_run(run=real_run(author, support, reviewer), user=author)

    def stricter(document: dict[str, Any]) -> None:
        document["steps"][1]["branches"][0]["when"]["value"] = 9

    change_draft(support, stricter)
    report = recipe_tests_replay(recipe=support, user=author)

    (result,) = report.results
    assert result.verdict == DIFFERS
    assert result.path == ["triage", "answer"]
    fork = result.fork
    assert fork is not None
    assert (fork.seq, fork.step) == (2, "answer")
    assert (fork.now.branch, fork.now.next) == ("give_up", "")
    assert (fork.recorded.branch, fork.recorded.next) == ("good", "review")
    assert "judge scored 8" in fork.recorded.reason
    assert "at #2 answer: now 'give_up' → stop" in result.message
    # The published version still takes the recorded path.
    assert support.latest_version is not None
    assert support.latest_version.document["steps"][1]["branches"][0]["when"]["value"] == 7


def test_a_replay_that_reaches_a_step_without_recorded_answers_calls_no_model(
    story: Recipe, author: Any
) -> None:
    recipe_publish(recipe=story, user=author)
    run = run_here(run_start(user=author, recipe=story, inputs={"topic": "owls"}))
    test = recipe_test_from_run(run=run, user=author)
    assert test.script == {"writer": [STORY], "judge": ["Score: 9"]}
    graph, _ = version_graph(run.version_id, run.version.created_at)
    # A model alias the script leaves out fails its calls (a scripted actor answers: it is free).
    assert recipe_test_script({}, graph) == {}
    ActorFactory(name="paid-writer", openai=True)

    def paid(document: dict[str, Any]) -> None:
        document["actors"]["paid"] = "paid-writer"
        document["steps"][0]["actor"] = "paid"

    change_draft(story, paid)
    report = recipe_tests_replay(recipe=story, user=author)

    (result,) = report.results
    assert result.verdict == DIFFERS
    assert result.run is not None
    # Its step failed at once, before any request to the model's server.
    assert "no scripted answer for 'paid'" in result.run.steps.get().error


def test_a_replay_of_a_draft_that_cannot_run_lists_its_errors(
    support: Recipe, author: Any, reviewer: Any
) -> None:
    recipe_test_from_run(run=real_run(author, support, reviewer), user=author)
    broken = document_from_recipe(support)
    broken["steps"][0]["branches"][0]["target"] = "nowhere"

    report = recipe_tests_replay(recipe=support, user=author, document=broken)

    assert report.results == []
    assert any("nowhere" in e for e in report.errors)


def test_a_failed_model_call_is_recorded_as_a_scripted_failure(
    author: Any, reviewers: Group
) -> None:
    ActorFactory(name="rec-down", config={"replies": ["@error: the model is down"]})
    document = {
        "format": "branchline.recipe/v1",
        "slug": "fragile",
        "name": "Fragile",
        "inputs": {},
        "actors": {"writer": "rec-down"},
        "steps": [
            {
                "key": "write",
                "name": "Write",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Write",
                "branches": [
                    {
                        "name": "broken",
                        "priority": 1,
                        "when": {"type": "execution_error", "operator": "equals", "value": True},
                        "action": "END_RECIPE",
                        "target": "@end",
                    }
                ],
            }
        ],
    }
    recipe = recipe_import(user=author, data=document).recipe
    recipe_publish(recipe=recipe, user=author)
    run = run_here(run_start(user=author, recipe=recipe, inputs={}))
    assert run.status == RunStatus.ENDED

    test = recipe_test_from_run(run=run, user=author)
    recipe_test_run_here(test=test, user=author)

    assert test.script == {"writer": ["@error: the model is down"]}
    test.refresh_from_db()
    assert (test.last_result, test.expected_status) == ("passed", "ended")


# --- refusals -------------------------------------------------------------------------------


def test_it_refuses_a_cancelled_run(support: Recipe, author: Any) -> None:
    run = run_here(run_start(user=author, recipe=support, inputs={"message": "bill?"}))
    run = run_cancel(run=run)

    with pytest.raises(RunNotRecordable, match="was cancelled"):
        recipe_test_from_run(run=run, user=author)


def test_it_refuses_a_run_that_is_still_running(support: Recipe, author: Any) -> None:
    run = run_here(run_start(user=author, recipe=support, inputs={"message": "bill?"}))
    assert run.status == RunStatus.WAITING_HUMAN

    with pytest.raises(
        RunNotRecordable, match="waits for a reviewer: save it as a test once it has finished"
    ):
        recipe_test_from_run(run=run, user=author)


def test_it_refuses_a_run_saved_already(support: Recipe, author: Any, reviewer: Any) -> None:
    run = real_run(author, support, reviewer)
    test = recipe_test_from_run(run=run, user=author)
    with pytest.raises(RunNotRecordable, match=f"saved as the test '{test.name}' already"):
        recipe_test_from_run(run=run, user=author)


def dry_run(author: Any, recipe: Recipe) -> Run:
    """A dry run of the support recipe: its writer and reviewers scripted, the others real."""
    script = {"writer": ["meh", ANSWER], "editors": ["approve: fine"]}
    run = run_start(user=author, recipe=recipe, inputs={"message": "Bill?"}, script=script)
    return run_here(run)


def test_a_dry_run_is_saved_as_a_test_that_passes(support: Recipe, author: Any) -> None:
    run = dry_run(author, support)
    assert run.status == RunStatus.SUCCEEDED

    test = recipe_test_from_run(run=run, user=author, name="Billing, approved")

    assert (test.name, test.source_run_id) == ("Billing, approved", run.pk)
    assert test.expected_path == ["triage", "answer", "review"]
    assert test.script["writer"] == ["meh", ANSWER]
    assert test.script["editors"] == ["approve: fine"]
    assert recipe_test_run_here(test=test, user=author).last_result == RecipeTest.Result.PASSED


# --- pages ----------------------------------------------------------------------------------


def test_the_monitor_of_a_finished_run_offers_save_as_test_to_its_owner_only(
    support: Recipe, author: Any, reviewer: Any, web: Client
) -> None:
    run = real_run(author, support, reviewer)
    support.shared_with_users.add(reviewer)
    other = Client()
    other.force_login(reviewer)

    assert "Save as test" in web.get(f"/runs/{run.pk}/").content.decode()
    assert "Save as test" not in other.get(f"/runs/{run.pk}/").content.decode()


def test_save_as_test_makes_the_test_and_opens_the_recipe_tests(
    support: Recipe, author: Any, reviewer: Any, web: Client
) -> None:
    run = real_run(author, support, reviewer)

    response = web.post(reverse("run-save-as-test", args=[run.pk]), HTTP_HX_REQUEST="true")

    assert response.status_code == 204
    assert response["HX-Redirect"] == reverse("recipe-tests", args=[support.slug])
    assert RecipeTest.objects.get(source_run=run).expected_path == ["triage", "answer", "review"]
    page = web.get(reverse("recipe-tests", args=[support.slug])).content.decode()
    assert f"Run #{run.pk}" in page


def test_the_monitor_of_a_finished_dry_run_offers_save_as_test_with_a_name(
    support: Recipe, author: Any, web: Client
) -> None:
    run = dry_run(author, support)

    page = web.get(f"/runs/{run.pk}/").content.decode()

    assert "Save as test" in page
    assert 'name="name"' in page and f'placeholder="Run #{run.pk}"' in page


def test_save_as_test_saves_a_dry_run_under_the_name_given(
    support: Recipe, author: Any, web: Client
) -> None:
    run = dry_run(author, support)

    response = web.post(
        reverse("run-save-as-test", args=[run.pk]),
        {"name": "  Billing goes to the writer  "},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 204
    assert RecipeTest.objects.get(source_run=run).name == "Billing goes to the writer"


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("x" * 191, "at most 190 characters"),
        ("Taken", "A test called &#x27;Taken&#x27; exists already: choose another name."),
    ],
)
def test_save_as_test_says_beside_the_name_what_is_wrong_with_it(
    support: Recipe, author: Any, web: Client, name: str, error: str
) -> None:
    RecipeTest.objects.create(recipe=support, name="Taken", expected_path=["triage"])
    run = dry_run(author, support)

    response = web.post(
        reverse("run-save-as-test", args=[run.pk]), {"name": name}, HTTP_HX_REQUEST="true"
    )

    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="save-as-test-name-error"' in body and error in body
    assert f'value="{name}"' in body  # nothing typed is lost
    assert not RecipeTest.objects.filter(source_run=run).exists()


def test_save_as_test_explains_why_a_running_run_cannot_be_saved(
    support: Recipe, author: Any, web: Client
) -> None:
    run = run_here(run_start(user=author, recipe=support, inputs={"message": "bill?"}))

    response = web.post(reverse("run-save-as-test", args=[run.pk]), HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert "waits for a reviewer: save it as a test once" in response.content.decode()
    assert not RecipeTest.objects.exists()


def test_save_as_test_of_another_users_run_is_not_found(
    support: Recipe, author: Any, reviewer: Any, stranger_web: Client
) -> None:
    run = real_run(author, support, reviewer)
    reviewer_web = Client()
    reviewer_web.force_login(reviewer)
    support.shared_with_users.add(reviewer)

    assert stranger_web.post(reverse("run-save-as-test", args=[run.pk])).status_code == 404
    assert reviewer_web.post(reverse("run-save-as-test", args=[run.pk])).status_code == 404
    assert not RecipeTest.objects.exists()


def test_the_tests_page_replays_against_the_draft_and_shows_the_differing_branch(
    support: Recipe, author: Any, reviewer: Any, web: Client
) -> None:
    run = real_run(author, support, reviewer)
    recipe_test_from_run(run=run, user=author)
    change_draft(support, lambda d: d["steps"][1]["branches"][0]["when"].update(value=9))

    page = web.get(reverse("recipe-tests", args=[support.slug])).content.decode()
    response = web.post(reverse("recipe-tests-replay", args=[support.slug]), HTTP_HX_REQUEST="true")

    assert "Replay against the draft" in page
    html = response.content.decode()
    assert response.status_code == 200
    assert "1 of 1</strong> test would now take another path" in html
    assert '<code class="branch">give_up</code>' in html
    assert "judge scored 8" in html
    assert f"recorded from run #{run.pk}" in html
    replay = Run.objects.exclude(pk=run.pk).get()
    assert f"/runs/compare/?a={run.pk}&amp;b={replay.pk}" in html


@pytest.mark.parametrize("url", ["/runs/1/save-as-test/", "/recipes/support/tests/replay/"])
def test_the_new_pages_need_a_login(db: None, url: str) -> None:
    response = Client().post(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_another_users_recipe_cannot_be_replayed(support: Recipe, stranger_web: Client) -> None:
    response = stranger_web.post(reverse("recipe-tests-replay", args=[support.slug]))

    assert response.status_code == 404
    assert not Run.objects.exists()


def test_the_replay_refuses_a_posted_document_that_is_not_json(
    support: Recipe, web: Client
) -> None:
    response = web.post(
        reverse("recipe-tests-replay", args=[support.slug]),
        {"document": "{"},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 400
    assert "document: not JSON" in response.content.decode()


# --- manage.py test_recipes -----------------------------------------------------------------


def call_test_recipes(*args: str) -> tuple[str, int]:
    out = StringIO()
    try:
        call_command("test_recipes", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc.returncode
    return out.getvalue(), 0


def test_test_recipes_exits_0_when_every_test_passes_and_prints_the_coverage(
    support: Recipe, author: Any, reviewer: Any, tmp_path: Path
) -> None:
    recipe_test_from_run(run=real_run(author, support, reviewer), user=author)
    report = tmp_path / "junit.xml"

    out, status = call_test_recipes("--junit-xml", str(report))

    assert status == 0
    assert "support (v1):" in out
    assert "PASS  Run #" in out
    assert "1 passed, 0 failed, 0 could not run · branch coverage 3/6 (50%)" in out
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("support", "1", "0")


def test_test_recipes_exits_1_with_a_junit_file_naming_the_failed_test(
    story: Recipe, author: Any, tmp_path: Path
) -> None:
    recipe_publish(recipe=story, user=author)
    RecipeTest.objects.create(
        recipe=story,
        name="approved at once",
        inputs={"topic": "sea"},
        script={"writer": [STORY], "judge": ["9"]},
        expected_path=["write"],
        expected_status="succeeded",
    )
    RecipeTest.objects.create(
        recipe=story,
        name="goes to review",
        inputs={"topic": "sea"},
        script={"writer": [STORY], "judge": ["9"]},
        expected_path=["write", "review"],
    )
    RecipeTest.objects.create(recipe=story, name="no inputs", expected_path=["write"])
    report = tmp_path / "reports" / "recipes.xml"

    out, status = call_test_recipes("story", "--junit-xml", str(report))

    assert status == 1
    assert "FAIL  goes to review: took write; expected write → review" in out
    assert "ERROR no inputs: inputs.topic: required" in out
    assert "1 passed, 1 failed, 1 could not run · branch coverage 1/7 (14%)" in out
    root = ET.parse(report).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in root.iter("testcase")}
    failure = cases["goes to review"].find("failure")
    assert failure is not None
    assert failure.get("message") == "took write; expected write → review"
    assert cases["goes to review"].get("classname") == "recipes.story"
    assert cases["approved at once"].find("failure") is None
    assert cases["no inputs"].find("error") is not None
    assert RecipeTest.objects.get(name="goes to review").last_result == "failed"


def test_test_recipes_runs_the_draft_with_draft_and_names_unknown_recipes(
    support: Recipe, author: Any, reviewer: Any, tmp_path: Path
) -> None:
    recipe_test_from_run(run=real_run(author, support, reviewer), user=author)
    change_draft(support, lambda d: d["steps"][1]["branches"][0]["when"].update(value=9))

    _published, published_status = call_test_recipes("support")
    draft, draft_status = call_test_recipes("support", "--draft")
    unknown, unknown_status = call_test_recipes("nope")

    assert published_status == 0
    assert draft_status == 1
    assert "support (draft):" in draft
    assert "took triage → answer; expected triage → answer → review" in draft
    assert unknown_status == 1
    assert "no recipe 'nope'" in unknown


def test_a_recorded_judge_verdict_gives_the_judge_total_the_attempt_kept() -> None:
    attempt = {
        "response": "meh",
        "rule_score": 0.5,
        "judge_total": 65,
        "confidence": 0.605,
        "feedback": "Cite it.",
    }
    scores = engine.parse_judge_answer(judge_verdict(attempt))
    assert scores.total == pytest.approx(65)
    assert engine.confidence(0.5, scores) == pytest.approx(0.605)


def recorded_document_run(owner: Any) -> tuple[Run, RecipeTest]:
    """A real run of a tree over an uploaded PDF, saved as a test."""
    document = pdf(["Loan application.", f"Pay with card {VALID_CARD}."])
    run = run_on(owner, [("loan.pdf", document)])
    return run, recipe_test_from_run(run=run, user=owner)


def test_a_run_with_files_is_saved_with_its_files_written_in_the_test(author: Any) -> None:
    run, test = recorded_document_run(author)

    written = test.inputs["doc"]
    assert set(written) == {"name", "content_base64", "media_type"}
    assert (written["name"], written["media_type"]) == ("loan.pdf", "application/pdf")
    assert base64.b64decode(written["content_base64"]).startswith(b"%PDF-")
    assert test.expected_path == ["route", "classify"]
    # The test holds its file: it no longer needs the run.
    run.delete()
    test.refresh_from_db()
    assert test.inputs["doc"] == written


def test_a_test_saved_from_a_run_with_files_uploads_them_again_and_passes(author: Any) -> None:
    run, test = recorded_document_run(author)

    recipe_test_run_here(test=test, user=author)

    test.refresh_from_db()
    assert (test.last_result, test.last_message) == ("passed", "")
    replayed = Run.objects.get(pk=test.last_run_id)
    assert replayed.files.get().name == "loan.pdf" and replayed.pk != run.pk


def test_a_run_whose_files_are_too_large_for_a_test_is_not_saved_saying_why(
    author: Any, web: Client
) -> None:
    document = pdf(["Loan application.", f"Pay with card {VALID_CARD}."])
    run = run_on(author, [("loan.pdf", document)])

    with override_settings(RECIPE_TEST_MAX_FILE_BYTES=len(document) - 1):
        response = web.post(reverse("run-save-as-test", args=[run.pk]), HTTP_HX_REQUEST="true")
        with pytest.raises(RunNotRecordable, match=f"more than the {len(document) - 1:,}"):
            recipe_test_from_run(run=run, user=author)

    assert response.status_code == 200
    page = response.content.decode()
    assert f"its files are {len(document):,} bytes together" in page
    assert "in base64" in page
    assert not RecipeTest.objects.exists()
    with override_settings(RECIPE_TEST_MAX_FILE_BYTES=len(document)):
        assert recipe_test_from_run(run=run, user=author).inputs["doc"]["name"] == "loan.pdf"


def test_the_monitor_of_a_run_saved_already_names_its_test_instead_of_the_form(
    support: Recipe, author: Any, web: Client
) -> None:
    run = dry_run(author, support)
    recipe_test_from_run(run=run, user=author, name="Billing <approved>")

    page = web.get(f"/runs/{run.pk}/").content.decode()

    assert "Saved as the test" in page and "“Billing &lt;approved&gt;”" in page
    assert 'name="name"' not in page
