"""The demo recipes ship recipe tests that take every branch; `test_recipes --min-coverage`."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from editor.models import RecipeTest
from workflows.demo import (
    RECIPE_TESTS_DIR,
    RECIPES_DIR,
    REVIEWER_GROUP,
    recipe_files,
    recipe_test_files,
)
from workflows.demo.actors import DEMO_ACTORS
from workflows.models import Actor, Recipe
from workflows.services import recipe_import, recipe_publish


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_every_demo_recipe_has_a_test_file() -> None:
    assert [p.stem for p in recipe_test_files()] == [p.stem for p in recipe_files()]
    for path in recipe_test_files():
        tests = json.loads(path.read_text())
        assert tests, path.name
        assert len({t["name"] for t in tests}) == len(tests), f"{path.name}: names repeat"


def run_test_recipes(*args: str) -> tuple[str, int, str]:
    out = io.StringIO()
    try:
        call_command("test_recipes", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc.returncode, str(exc)
    return out.getvalue(), 0, ""


@pytest.mark.django_db(transaction=True)
def test_seed_demo_tests_every_demo_recipe_with_full_branch_coverage(tmp_path: Path) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    report = tmp_path / "recipes.xml"

    out, status, error = run_test_recipes(
        "--min-coverage", "100", "--junit-xml", str(report), "-v", "2"
    )

    assert status == 0, out + error
    assert "not taken" not in out
    suites = {s.get("name"): s for s in ET.parse(report).getroot().iter("testsuite")}
    assert set(suites) == {p.stem for p in recipe_files()}
    for slug, suite in suites.items():
        count = len(json.loads((RECIPE_TESTS_DIR / f"{slug}.json").read_text()))
        assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == (
            str(count),
            "0",
            "0",
        ), slug
        coverage = {p.get("name"): p.get("value") for p in suite.iter("property")}
        covered, total = coverage["branch_coverage"].split("/")
        assert covered == total and int(total) > 0, slug
        assert f"{slug} (v" in out
    assert out.count("(100%)") == len(suites)


@pytest.fixture
def validation_loop(db: None) -> Recipe:
    """The demo's validation-loop recipe alone, published, with its actors."""
    Group.objects.get_or_create(name=REVIEWER_GROUP)
    for spec in DEMO_ACTORS:
        Actor.objects.create(**spec)
    owner = get_user_model().objects.create_user(username="owner", password="not-used-here")
    data = (RECIPES_DIR / "validation-loop.json").read_bytes()
    recipe = recipe_import(user=owner, data=data).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


def seed_tests(*args: str) -> str:
    out = io.StringIO()
    call_command("seed_demo_tests", *args, stdout=out)
    return out.getvalue()


def test_seed_demo_tests_keeps_edited_tests_unless_reset(validation_loop: Recipe) -> None:
    out = seed_tests()
    assert "validation-loop (2 tests, 2 new)" in out
    assert "creative-writing-qc: no such recipe, tests not seeded" in out
    test = RecipeTest.objects.get(recipe=validation_loop, name="good answer is validated")
    test.expected_path = ["edited"]
    test.save()

    assert "validation-loop (2 tests, 0 new)" in seed_tests()
    test.refresh_from_db()
    assert test.expected_path == ["edited"]

    seed_tests("--reset")
    test.refresh_from_db()
    assert test.expected_path == ["answer"]


def test_min_coverage_fails_a_recipe_whose_tests_miss_a_branch(validation_loop: Recipe) -> None:
    seed_tests()
    RecipeTest.objects.filter(recipe=validation_loop, name__contains="fallback").delete()

    out, status, error = run_test_recipes("validation-loop", "-v", "2")
    assert status == 0
    assert "branch coverage 1/3 (33%)" in out
    assert "not taken: answer → low_confidence_fallback" in out

    out, status, error = run_test_recipes("validation-loop", "--min-coverage", "100")
    assert status == 1
    assert error == "branch coverage under 100%: validation-loop (1/3)"

    out, status, error = run_test_recipes("validation-loop", "--min-coverage", "30")
    assert status == 0


def test_min_coverage_must_be_a_share(validation_loop: Recipe) -> None:
    with pytest.raises(CommandError, match="from 0 to 100"):
        call_command("test_recipes", "--min-coverage", "150", stdout=io.StringIO())


@pytest.mark.django_db
def test_recipe_tests_over_the_upload_rate_are_errors_not_crashes(settings: Any) -> None:
    from editor.services import recipe_tests_run

    call_command("seed_demo", stdout=io.StringIO())
    settings.RUN_FILE_UPLOADS_PER_MINUTE = 0
    recipe = Recipe.objects.get(slug="regulatory-decision-tree")

    tested = recipe_tests_run(recipe=recipe, user=recipe.owner)

    assert tested and {t.last_result for t in tested} == {RecipeTest.Result.ERROR}
    assert all("files may be uploaded a minute" in t.last_message for t in tested)
