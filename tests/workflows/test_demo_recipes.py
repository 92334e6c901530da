"""The demo recipes import clean, round-trip and walk every path; `seed_demo` is idempotent."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.utils import timezone

from knowledge.models import Document, KnowledgeBase
from runner import advance, services
from runner.human import task_decide, tasks_expire
from runner.run_files import Upload
from runner.status import RUNNABLE
from tests.documents import VALID_CARD, pdf
from workflows.adapters import document_from_recipe
from workflows.demo import (
    DEMO_USERNAME,
    DOCS_BASE_SLUG,
    REVIEWER_GROUP,
    REVIEWER_USERNAME,
    docs_files,
    recipe_files,
)
from workflows.demo.actors import (
    CITED_ANSWER,
    DEMO_ACTORS,
    DONT_KNOW,
    DRAGON_STORY,
    GOOD_ANSWER,
    PRIMES,
    REAL_MODEL_MAX_TOKENS,
    REVISED_ANSWER,
    UNCITED_ANSWER,
    first_primes,
)
from workflows.models import Actor, Recipe, RecipeVersion
from workflows.services import recipe_import, recipe_lint

FILES = recipe_files()
SLUGS = {
    "creative-writing-qc",
    "validation-loop",
    "regulatory-decision-tree",
    "first-1000-primes",
    "document-routing",
    "answer-with-citations",
    "calculate-with-tools",
}


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    """Hash the seeded users' passwords quickly: these tests are not about hashing."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def demo_owner(db: None) -> Any:
    """Create the demo actors and reviewer group, and return a user to own the recipes."""
    Group.objects.get_or_create(name=REVIEWER_GROUP)
    for spec in DEMO_ACTORS:
        Actor.objects.create(**spec)
    return get_user_model().objects.create_user(username="owner", password="not-used-here")


def seed(*args: str) -> str:
    out = io.StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def printed_password(output: str, username: str) -> str:
    found = re.search(rf"user {username} (?:created|exists), (?:new )?password: (\S+)", output)
    assert found, output
    return found.group(1)


def test_there_is_one_demo_file_per_reference_design_and_the_citations_demo() -> None:
    assert {json.loads(path.read_text())["slug"] for path in FILES} == SLUGS
    assert {path.stem for path in FILES} == SLUGS


@pytest.mark.django_db
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_it_imports_each_demo_file_without_errors_or_warnings(path: Path, demo_owner: Any) -> None:
    result = recipe_import(user=demo_owner, data=path.read_bytes())

    assert result.created
    assert result.warnings == []
    assert recipe_lint(recipe=result.recipe) == []


@pytest.mark.django_db
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_it_exports_each_demo_file_back_as_it_is_written(path: Path, demo_owner: Any) -> None:
    recipe = recipe_import(user=demo_owner, data=path.read_bytes()).recipe

    exported = document_from_recipe(recipe)

    # Equal as JSON; key order inside conditions is the database's (PostgreSQL's jsonb sorts).
    assert exported == json.loads(path.read_text())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_step_of_each_demo_file_has_a_canvas_position(path: Path) -> None:
    steps = json.loads(path.read_text())["steps"]

    positions = [(s["position"]["x"], s["position"]["y"]) for s in steps]

    assert len(set(positions)) == len(steps)


def test_the_scripted_mathematician_knows_the_first_1000_primes() -> None:
    primes = [int(p) for p in PRIMES.split(", ")]

    assert len(primes) == 1000
    assert primes[:5] == [2, 3, 5, 7, 11]
    assert primes[-1] == 7919
    assert first_primes(10) == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]


def test_the_demo_recipes_only_name_scripted_actors_or_reviewer_groups() -> None:
    scripted = {a["name"] for a in DEMO_ACTORS if a["provider"] == "scripted"}
    for path in FILES:
        for reference in json.loads(path.read_text())["actors"].values():
            assert reference in scripted or reference == f"@human:{REVIEWER_GROUP}", reference


@pytest.mark.django_db
def test_seed_demo_creates_the_users_group_actors_recipes_and_versions() -> None:
    output = seed()

    users = get_user_model().objects
    demo = users.get(username=DEMO_USERNAME)
    reviewer = users.get(username=REVIEWER_USERNAME)
    assert demo.check_password(printed_password(output, DEMO_USERNAME))
    assert reviewer.check_password(printed_password(output, REVIEWER_USERNAME))
    assert demo.is_staff and not demo.is_superuser
    assert demo.has_perm("workflows.view_actor")
    assert not reviewer.is_staff
    group = Group.objects.get(name=REVIEWER_GROUP)
    assert set(group.user_set.values_list("username", flat=True)) == {"demo", "reviewer"}
    assert set(Actor.objects.values_list("name", flat=True)) == {a["name"] for a in DEMO_ACTORS}
    assert set(Recipe.objects.values_list("slug", flat=True)) == SLUGS
    for recipe in Recipe.objects.all():
        assert recipe.owner == demo
        assert list(recipe.versions.values_list("number", flat=True)) == [1]
        assert recipe.versions.get().document == document_from_recipe(recipe)


@pytest.mark.django_db
def test_seed_demo_run_again_changes_nothing_and_keeps_the_passwords() -> None:
    first = seed()
    revisions = dict(Recipe.objects.values_list("slug", "revision"))

    second = seed()

    assert "user demo exists (password unchanged; use --reset-password)" in second
    assert "user reviewer exists (password unchanged; use --reset-password)" in second
    assert "password:" not in second
    demo = get_user_model().objects.get(username=DEMO_USERNAME)
    assert demo.check_password(printed_password(first, DEMO_USERNAME))
    assert dict(Recipe.objects.values_list("slug", "revision")) == revisions
    assert RecipeVersion.objects.count() == len(SLUGS)
    assert Actor.objects.count() == len(DEMO_ACTORS)
    documents = list(Document.objects.values_list("pk", "updated_at"))
    assert f"{DOCS_BASE_SLUG} (4 documents, " in second and "; 0 indexed now)" in second
    assert list(Document.objects.values_list("pk", "updated_at")) == documents


@pytest.mark.django_db
def test_seed_demo_indexes_the_projects_docs_in_a_knowledge_base_the_editors_may_read() -> None:
    output = seed()

    base = KnowledgeBase.objects.get(slug=DOCS_BASE_SLUG)
    assert base.owner.username == DEMO_USERNAME
    assert list(base.shared_with_groups.values_list("name", flat=True)) == [REVIEWER_GROUP]
    assert base.embedding_actor is not None and base.embedding_actor.name == "demo-embedder"
    files = docs_files()
    assert {p.name for p in files} >= {"README.md", "recipe-format.md"}
    documents = base.documents.order_by("filename")
    assert sorted(d.filename for d in documents) == sorted(p.name for p in files)
    assert {d.status for d in documents} == {Document.Status.READY}
    chunks = base.chunks.count()
    assert chunks > len(files) and not base.chunks.filter(embedding=None).exists()
    assert f"{DOCS_BASE_SLUG} (4 documents, {chunks} chunks; 4 indexed now)" in output


@pytest.mark.django_db
def test_seed_demo_indexes_a_changed_doc_again_in_place_of_the_old(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# Branchline\n\nRecipes branch on what a step found.\n")
    monkeypatch.setattr("knowledge.management.commands.seed_demo.docs_files", lambda: [readme])
    seed()
    old = Document.objects.get()

    readme.write_text("# Branchline\n\nRecipes search knowledge bases and cite them.\n")
    output = seed()

    new = Document.objects.get()
    assert new.pk != old.pk and "cite them" in new.text
    assert new.status == Document.Status.READY
    assert f"{DOCS_BASE_SLUG} (1 documents, 1 chunks; 1 indexed now)" in output


@pytest.mark.django_db
def test_seed_demo_leaves_a_docs_base_of_another_user_alone() -> None:
    from knowledge.ingest import create_base

    create_base(
        owner=get_user_model().objects.create_user("someone"), slug=DOCS_BASE_SLUG, name="x"
    )

    output = seed()

    assert f"knowledge base {DOCS_BASE_SLUG} belongs to another user: left as it is" in output
    assert not Document.objects.exists()


@pytest.mark.django_db
def test_seed_demo_gives_new_passwords_only_when_asked() -> None:
    first = seed()

    second = seed("--reset-password")

    demo = get_user_model().objects.get(username=DEMO_USERNAME)
    new_password = printed_password(second, DEMO_USERNAME)
    assert new_password != printed_password(first, DEMO_USERNAME)
    assert demo.check_password(new_password)


@pytest.mark.django_db
def test_seed_demo_keeps_an_edited_draft() -> None:
    seed()
    recipe = Recipe.objects.get(slug="validation-loop")
    document = document_from_recipe(recipe)
    document["name"] = "Edited"
    recipe_import(user=recipe.owner, data=document, replace=True)

    seed()

    recipe.refresh_from_db()
    assert recipe.name == "Edited"


@pytest.mark.django_db
def test_seed_demo_resets_an_edited_draft_when_asked() -> None:
    seed()
    recipe = Recipe.objects.get(slug="validation-loop")
    document = document_from_recipe(recipe)
    document["name"] = "Edited"
    recipe_import(user=recipe.owner, data=document, replace=True)

    seed("--reset-recipes")

    recipe.refresh_from_db()
    assert recipe.name == "Answer with a Validation Loop"
    # The file equals version 1 again, so no new version is needed.
    assert list(recipe.versions.values_list("number", flat=True)) == [1]


@pytest.mark.django_db
def test_seed_demo_updates_an_actor_changed_in_the_database() -> None:
    seed()
    Actor.objects.filter(name="demo-writer").update(config={"replies": ["changed"]})

    seed()

    writer = Actor.objects.get(name="demo-writer")
    assert writer.config == next(a for a in DEMO_ACTORS if a["name"] == "demo-writer")["config"]


@pytest.mark.django_db
def test_seed_demo_points_the_writer_judge_and_classifier_at_a_real_model_and_back(
    settings: Any,
) -> None:
    settings.PROVIDER_URL_ALLOWLIST = [*settings.PROVIDER_URL_ALLOWLIST, "127.0.0.1:8090"]
    url = "http://127.0.0.1:8090/v1"

    output = seed("--model-url", url, "--model-name", "smollm2-135m-instruct")

    real = {a.name: a for a in Actor.objects.filter(provider="openai")}
    assert (
        set(real)
        == set(REAL_MODEL_MAX_TOKENS)
        == {
            "demo-writer",
            "demo-judge",
            "demo-classifier",
        }
    )
    for name, actor in real.items():
        assert (actor.base_url, actor.model, actor.api_key_env) == (
            url,
            "smollm2-135m-instruct",
            "",
        )
        assert actor.params == {
            "temperature": 0,
            "seed": 42,
            "max_tokens": REAL_MODEL_MAX_TOKENS[name],
        }
        assert actor.price_in_per_million is None and actor.problems() == []
    assert Actor.objects.get(name="demo-clerk").provider == "scripted"
    assert f"Answered by smollm2-135m-instruct at {url}: demo-writer, demo-judge" in output

    seed()

    assert not Actor.objects.filter(provider="openai").exists()
    for spec in DEMO_ACTORS:
        actor = Actor.objects.get(name=spec["name"])
        assert all(getattr(actor, field) == value for field, value in spec.items()), actor.name


@pytest.mark.django_db
def test_seed_demo_needs_the_models_name_and_an_allowed_url() -> None:
    with pytest.raises(CommandError, match="--model-url needs --model-name"):
        seed("--model-url", "http://127.0.0.1:8090/v1")
    with pytest.raises(CommandError, match=r"--model-url: .*add it to PROVIDER_URL_ALLOWLIST"):
        seed("--model-url", "http://127.0.0.1:8090/v1", "--model-name", "smollm2")

    assert not Actor.objects.exists()


# -- Every path of the demo recipes, walked by dry-run scripts (and by the scripted actors) ----
#
# The runner's steps are executed here in the test's own thread (`advance.advance`); the
# queue messages it sends after commit never leave the test transaction.

SHORT = "A keeper, a lamp, a storm. The end."
STORY = (
    "Mara kept the lighthouse for thirty winters and knew every storm by its voice. " * 4
).strip()
GOOD_SCORES = json.dumps(
    {"relevance": 24, "helpfulness": 23, "accuracy": 24, "completeness": 22, "feedback": "Good."}
)
LOW_SCORES = json.dumps(
    {"relevance": 10, "helpfulness": 8, "accuracy": 12, "completeness": 5, "feedback": "Vaguer."}
)
INTENT = json.dumps({"dataType": "numbers", "expectedFormat": "raw_data"})
VALID = json.dumps({"dataTypeMatch": True, "qualityScore": 0.97})
INVALID = json.dumps({"dataTypeMatch": False, "qualityScore": 0.2})
YES = json.dumps({"selected": True, "reason": "fits"})
NO = json.dumps({"selected": False, "reason": "does not fit"})


@pytest.fixture
def demo(db: None) -> Any:
    """Seed the demo without the scripted actors' delays; return the demo user."""
    seed()
    for actor in Actor.objects.filter(provider="scripted"):
        actor.config = {**actor.config, "delay_ms": 0}
        actor.save()
    return get_user_model().objects.get(username=DEMO_USERNAME)


def start(user: Any, slug: str, inputs: dict[str, Any] | None = None, **script: Any) -> Any:
    recipe = Recipe.objects.get(slug=slug)
    run = services.run_start(user=user, recipe=recipe, inputs=inputs or {}, script=script or None)
    return drive(run)


def drive(run: Any) -> Any:
    """Execute the run's steps until it finishes or waits for a reviewer."""
    for _ in range(100):
        run.refresh_from_db()
        if run.status not in RUNNABLE:
            return run
        advance.advance(run.pk, time_slice=60)
    raise AssertionError(f"run {run.pk} did not stop: {run.status}")


def walked(run: Any) -> list[str]:
    return list(run.steps.order_by("seq").values_list("step_key", flat=True))


def taken(run: Any) -> list[str]:
    return [e.branch for s in run.steps.order_by("seq") for e in s.evaluations.filter(taken=True)]


def decide(run: Any, decision: str, comment: str = "") -> Any:
    task = run.tasks.get(status="open")
    reviewer = get_user_model().objects.get(username=REVIEWER_USERNAME)
    task_decide(task_id=task.pk, user=reviewer, decision=decision, comment=comment)
    return drive(run)


@pytest.mark.parametrize(
    ("script", "status", "outcome", "path", "branches"),
    [
        pytest.param(
            {"writer": [STORY], "judge": ["9"]},
            "succeeded",
            "approved",
            ["generate_story"],
            ["high_quality_story"],
            id="approved-by-judge",
        ),
        pytest.param(
            {"writer": [SHORT, STORY], "judge": ["9"]},
            "succeeded",
            "approved",
            ["generate_story", "generate_story"],
            ["story_too_short", "high_quality_story"],
            id="too-short-then-longer",
        ),
        pytest.param(
            {"writer": [STORY + " Then came the violence."]},
            "ended",
            "ended",
            ["generate_story"],
            ["inappropriate_content"],
            id="inappropriate",
        ),
        pytest.param(
            {"writer": [STORY], "judge": ["7"]},
            "succeeded",
            "approved",
            ["generate_story", "evaluate_quality"],
            ["default_evaluation", "good_quality"],
            id="good-enough-after-review",
        ),
        pytest.param(
            {"writer": [STORY], "judge": ["5"], "editors": ["approve"]},
            "succeeded",
            "approved",
            ["generate_story", "evaluate_quality", "editor_review"],
            ["default_evaluation", "low_quality", "editor_approved"],
            id="editor-approves",
        ),
        pytest.param(
            {"writer": [STORY], "judge": ["5"], "editors": ["reject: not for us"]},
            "ended",
            "ended",
            ["generate_story", "evaluate_quality", "editor_review"],
            ["default_evaluation", "low_quality", "editor_rejected"],
            id="editor-rejects",
        ),
        pytest.param(
            {"writer": [STORY], "judge": ["5"], "editors": ["revise: add a dragon", "approve"]},
            "succeeded",
            "approved",
            [
                "generate_story",
                "evaluate_quality",
                "editor_review",
                "revise_story",
                "editor_review",
            ],
            [
                "default_evaluation",
                "low_quality",
                "editor_wants_revision",
                "back_to_review",
                "editor_approved",
            ],
            id="editor-asks-for-a-revision",
        ),
    ],
)
def test_creative_writing_paths(
    demo: Any,
    script: dict[str, Any],
    status: str,
    outcome: str,
    path: list[str],
    branches: list[str],
) -> None:
    run = start(demo, "creative-writing-qc", **script)

    assert (run.status, run.outcome, run.error) == (status, outcome, "")
    assert walked(run) == path
    assert taken(run) == branches


def test_creative_writing_revision_gets_the_editors_comment_and_the_story(demo: Any) -> None:
    script = {"writer": [STORY], "judge": ["5"], "editors": ["revise: add a dragon", "approve"]}
    run = start(demo, "creative-writing-qc", **script)

    revise = run.steps.get(step_key="revise_story")
    assert revise.prompt.startswith("Revise the story based on this feedback: add a dragon")
    assert STORY in revise.prompt
    first_review, second_review = run.tasks.order_by("pk")
    assert first_review.material.startswith(f"Story:\n{STORY}")
    assert second_review.material.endswith(
        f"Latest revision (empty until one is asked for):\n{revise.response}"
    )


def test_creative_writing_ends_when_the_editors_do_not_decide_in_time(demo: Any) -> None:
    run = start(demo, "creative-writing-qc", writer=[STORY], judge=["5"])
    assert run.status == "waiting_human"
    assert run.tasks.get().due_at is not None

    assert tasks_expire(now=timezone.now() + timedelta(days=2)) == 1
    run = drive(run)

    assert (run.status, run.outcome) == ("ended", "ended")
    assert taken(run)[-1] == "review_timed_out"


def test_creative_writing_with_the_scripted_actors_waits_for_the_editors(demo: Any) -> None:
    run = start(demo, "creative-writing-qc")

    assert run.status == "waiting_human"
    assert walked(run) == ["generate_story", "generate_story", "evaluate_quality", "editor_review"]
    assert taken(run) == ["story_too_short", "default_evaluation", "low_quality"]
    run = decide(run, "revise", "Add a dragon, please.")
    assert run.steps.get(step_key="revise_story").response == DRAGON_STORY
    run = decide(run, "approve")
    assert (run.status, run.outcome) == ("succeeded", "approved")


@pytest.mark.parametrize(
    ("judge", "attempts", "path", "outcome"),
    [
        pytest.param([GOOD_SCORES], 1, ["answer"], "approved", id="confident-at-once"),
        pytest.param(
            [LOW_SCORES, GOOD_SCORES], 2, ["answer"], "approved", id="retried-with-feedback"
        ),
        pytest.param([LOW_SCORES], 5, ["answer", "context_fallback"], "completed", id="fallback"),
    ],
)
def test_validation_loop_paths(
    demo: Any, judge: list[str], attempts: int, path: list[str], outcome: str
) -> None:
    run = start(demo, "validation-loop", judge=judge)

    assert (run.status, run.outcome) == ("succeeded", outcome)
    assert walked(run) == path
    answer = run.steps.get(step_key="answer")
    assert len(answer.details["validation"]["attempts"]) == attempts
    assert answer.details["validation"]["used_fallback"] == (attempts == 5)


def test_validation_loop_with_the_scripted_actors_passes_on_the_second_attempt(demo: Any) -> None:
    run = start(demo, "validation-loop")

    assert (run.status, run.outcome) == ("succeeded", "approved")
    answer = run.steps.get()
    assert answer.response == GOOD_ANSWER
    assert len(answer.details["validation"]["attempts"]) == 2
    assert answer.confidence >= 0.75


@pytest.mark.parametrize(
    ("document", "step"),
    [
        pytest.param(
            pdf(["Warehouse notes.", "Keep the detonators next to the fuel cans."]),
            "classify_safety",
            id="safety",
        ),
        pytest.param(
            pdf(["Loan application for Jane Roe.", f"Card on file: {VALID_CARD}."]),
            "classify_pii",
            id="pii",
        ),
        pytest.param(
            pdf(["Product sheet.", "The weapon shown below is a replica."], images_on=[2]),
            "classify_images",
            id="images-and-keywords",
        ),
        pytest.param(pdf(["A harbour at dawn."], images_on=[1]), "classify_base", id="base"),
    ],
)
def test_regulatory_decision_tree_paths(demo: Any, document: bytes, step: str) -> None:
    upload = Upload("document.pdf", document, "application/pdf")

    run = start(demo, "regulatory-decision-tree", {"document": upload})

    assert (run.status, run.outcome) == ("succeeded", "completed")
    assert walked(run) == ["choose_prompt", step]
    classified = run.steps.get(step_key=step)
    assert json.loads(classified.response)["risk"]
    assert "--- page 1 ---" in classified.prompt and '"name": "document.pdf"' in classified.prompt


def test_first_primes_with_the_scripted_actors_switches_to_the_learned_actor(demo: Any) -> None:
    run = start(demo, "first-1000-primes")

    assert (run.status, run.outcome) == ("succeeded", "approved")
    steps = list(run.steps.order_by("seq").values_list("step_key", "actor_alias"))
    assert steps == [
        ("analyze_intent", "planner"),
        ("deliver", "coder"),
        ("deliver", "coder"),
        ("deliver", "mathematician"),
    ]
    assert taken(run) == ["plan_action", "code_instead_of_data", "still_code", "all_criteria_met"]
    assert run.steps.get(step_key="deliver", attempt=3).response == PRIMES
    intent = json.loads(run.steps.get(step_key="analyze_intent").response)
    assert intent["expected_format"] == "raw_data"
    assert run.state["progress"]["analyze_intent"]["met"] == [True, True]


def test_first_primes_tells_a_later_run_what_worked_for_number_requests(demo: Any) -> None:
    first = start(demo, "first-1000-primes", coder=["Here they are, computed for you.", PRIMES])
    assert taken(first) == ["plan_action", "not_raw_data", "all_criteria_met"]
    assert "Strategies that worked" not in first.steps.get(step_key="deliver", attempt=1).prompt

    later = start(demo, "first-1000-primes", coder=[PRIMES])
    prompt = later.steps.filter(step_key="deliver").order_by("seq").first().prompt
    assert "Strategies that worked before for requests like this one:" in prompt
    assert "- Deliver the data itself, in the expected format" in prompt


@pytest.mark.parametrize(
    ("script", "branches"),
    [
        pytest.param(
            {"coder": ["Sorry, I was unable to do that."]},
            ["plan_action", "actor_failed", "all_criteria_met"],
            id="error-retried-with-another-actor",
        ),
        pytest.param(
            {"coder": ["2, 3, 5, 7, 11", PRIMES]},
            ["plan_action", "too_few_numbers", "all_criteria_met"],
            id="incomplete-list",
        ),
        pytest.param(
            {"coder": ["Here they are, computed for you.", PRIMES]},
            ["plan_action", "not_raw_data", "all_criteria_met"],
            id="prose-instead-of-numbers",
        ),
    ],
)
def test_first_primes_paths(demo: Any, script: dict[str, Any], branches: list[str]) -> None:
    run = start(demo, "first-1000-primes", **script)

    assert (run.status, run.error) == ("succeeded", "")
    assert taken(run) == branches


@pytest.mark.parametrize(
    ("classifier", "path"),
    [
        pytest.param([NO], ["classify_document", "respond"], id="respond-only"),
        pytest.param(
            [NO, YES, NO], ["classify_document", "review_contract", "respond"], id="contract"
        ),
        pytest.param(
            [YES],
            [
                "classify_document",
                "process_invoice",
                "review_contract",
                "handle_complaint",
                "respond",
            ],
            id="every-route",
        ),
        pytest.param(
            ["hmm, maybe", YES, NO, NO],
            ["classify_document", "process_invoice", "respond"],
            id="reclassified",
        ),
    ],
)
def test_document_routing_paths(demo: Any, classifier: list[str], path: list[str]) -> None:
    run = start(demo, "document-routing", classifier=classifier)

    assert (run.status, run.outcome) == ("succeeded", "completed")
    assert walked(run) == path


def test_document_routing_with_the_scripted_actors_handles_invoice_and_complaint(
    demo: Any,
) -> None:
    run = start(demo, "document-routing")

    assert (run.status, run.outcome) == ("succeeded", "completed")
    assert walked(run) == ["classify_document", "process_invoice", "handle_complaint", "respond"]
    classify = run.steps.get(step_key="classify_document")
    assert classify.details["selected"] == ["invoice", "complaint", "respond"]
    assert "replacements" in run.steps.get(step_key="respond").response


def break_actor(name: str) -> None:
    """Leave a scripted actor with nothing to say, so every call to it fails."""
    Actor.objects.filter(name=name).update(config={"replies": []})


def test_document_routing_sends_a_classifier_failure_to_the_reply(demo: Any) -> None:
    break_actor("demo-classifier")

    run = start(demo, "document-routing")

    assert (run.status, run.outcome) == ("succeeded", "error_handled")
    assert walked(run) == ["classify_document", "respond"]
    assert taken(run) == ["classification_failed", "reply_drafted"]


def test_first_primes_retries_a_failing_actor_with_another(demo: Any) -> None:
    break_actor("demo-coder")

    run = start(demo, "first-1000-primes")

    assert (run.status, run.outcome) == ("succeeded", "approved")
    deliveries = run.steps.filter(step_key="deliver").order_by("seq")
    assert [(s.actor_alias, s.status) for s in deliveries] == [
        ("coder", "failed"),
        ("mathematician", "succeeded"),
    ]
    assert taken(run)[1] == "actor_failed"


# -- answer-with-citations: a retrieve step over the project's docs ---------------------------

QUESTION = {"question": "How do I add a condition type?"}
HIT = {"document": "Adding a condition type", "text": "Write one module.", "score": 0.9}


def test_citations_with_the_scripted_actors_answer_from_the_docs_and_are_approved(
    demo: Any,
) -> None:
    run = start(demo, "answer-with-citations", QUESTION)

    assert (run.status, run.outcome, run.error) == ("succeeded", "approved", "")
    assert walked(run) == ["find_sources", "answer"]
    assert taken(run) == ["sources_found", "well_grounded"]
    find, answer = run.steps.order_by("seq")
    hits = find.details["retrieval"]["hits"]
    assert 1 <= len(hits) <= 4 and all(h["score"] >= 0.6 for h in hits)
    assert {h["knowledge_base"] for h in hits} == {DOCS_BASE_SLUG}
    assert find.response.startswith(f"[1] {hits[0]['document_title']} › ")
    assert find.response in answer.prompt
    assert answer.response == CITED_ANSWER
    assert [e.reason for e in answer.evaluations.order_by("order")] == [
        "cites [1]",
        "judge scored 8 >= 7",
    ]


def test_citations_of_a_question_the_docs_do_not_cover_say_i_dont_know(demo: Any) -> None:
    run = start(demo, "answer-with-citations", {"question": "Who won the 1998 world cup?"})

    assert run.status == "waiting_human"
    assert walked(run) == ["find_sources", "dont_know", "review"]
    assert taken(run) == ["nothing_found", "ask_editors"]
    assert run.steps.get(step_key="find_sources").details["retrieval"]["hits"] == []
    assert run.steps.get(step_key="dont_know").response == DONT_KNOW
    assert run.tasks.get().material.startswith(f"Answer:\n{DONT_KNOW}\n\nSources found:\n")
    run = decide(run, "approve")
    assert (run.status, run.outcome) == ("succeeded", "approved")


@pytest.mark.parametrize(
    ("script", "path", "branches", "status"),
    [
        pytest.param(
            {"sources.find_sources": [[]], "editors": ["reject"]},
            ["find_sources", "dont_know", "review"],
            ["nothing_found", "ask_editors", "rejected"],
            "ended",
            id="no-hits",
        ),
        pytest.param(
            {"sources.find_sources": [[HIT]], "librarian": ["No idea."], "editors": ["approve"]},
            ["find_sources", "answer", "review"],
            ["sources_found", "no_citation", "approved"],
            "succeeded",
            id="uncited",
        ),
        pytest.param(
            {"sources.find_sources": [[HIT]], "librarian": ["See [7]."], "editors": ["approve"]},
            ["find_sources", "answer", "review"],
            ["sources_found", "no_citation", "approved"],
            "succeeded",
            id="cites-a-hit-it-was-not-given",
        ),
        pytest.param(
            {"sources.find_sources": [[HIT]], "judge": ["4"], "editors": ["approve"]},
            ["find_sources", "answer", "review"],
            ["sources_found", "needs_review", "approved"],
            "succeeded",
            id="judge-unconvinced",
        ),
        pytest.param(
            {"sources.find_sources": [[HIT]], "judge": ["9"]},
            ["find_sources", "answer"],
            ["sources_found", "well_grounded"],
            "succeeded",
            id="judge-convinced",
        ),
        pytest.param(
            {"sources.find_sources": [[HIT]], "judge": ["4", "9"], "editors": ["revise: shorter"]},
            ["find_sources", "answer", "review", "answer"],
            ["sources_found", "needs_review", "revise_answer", "well_grounded"],
            "succeeded",
            id="revised-after-review",
        ),
        pytest.param(
            {"sources.find_sources": [[HIT]], "judge": ["4"], "editors": ["@timeout"]},
            ["find_sources", "answer", "review"],
            ["sources_found", "needs_review", "review_timed_out"],
            "ended",
            id="review-timed-out",
        ),
    ],
)
def test_citations_paths(
    demo: Any,
    script: dict[str, Any],
    path: list[str],
    branches: list[str],
    status: str,
) -> None:
    run = start(demo, "answer-with-citations", QUESTION, **script)

    assert (run.status, run.error) == (status, "")
    assert walked(run) == path
    assert taken(run) == branches


def test_citations_revision_answers_the_reviewers_note(demo: Any) -> None:
    script = {"judge": ["4", "9"], "editors": ["revise: cite the registry"]}
    run = start(demo, "answer-with-citations", QUESTION, **script)

    first, second = run.steps.filter(step_key="answer").order_by("seq")
    assert first.response == CITED_ANSWER
    assert second.prompt.endswith(": cite the registry")
    assert second.response == REVISED_ANSWER
    assert (run.status, run.outcome) == ("succeeded", "approved")


def test_citations_uncited_answer_says_why_it_goes_to_review(demo: Any) -> None:
    hits = {"sources.find_sources": [[HIT, HIT]]}
    run = start(demo, "answer-with-citations", {"question": "What is a dry run?"}, **hits)

    assert run.status == "waiting_human"
    answer = run.steps.get(step_key="answer")
    assert answer.response == UNCITED_ANSWER
    no_citation = answer.evaluations.get(branch="no_citation")
    assert (no_citation.taken, no_citation.reason) == (True, "cites no source (2 hits)")
    assert run.tasks.get().material.startswith(f"Answer:\n{UNCITED_ANSWER}\n\nSources found:\n[1] ")
