"""`manage.py test_recipes [SLUG…] [--junit-xml FILE] [--min-coverage PCT]`: recipe tests in CI.

Every test of the recipes named (or of every recipe that has tests) runs as a dry run here,
one after the other, with no worker and no model: an alias its script leaves out fails its
calls instead of calling the model. One line per test, a summary per recipe with its branch
coverage, and exit status 1 when any test fails or cannot run, or (with `--min-coverage`) a
recipe's tests take fewer of its branches than that share. The JUnit XML report (a
testsuite per recipe, a testcase per test) is written whatever the result.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from argparse import ArgumentTypeError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from workflows.adapters import document_from_recipe
from workflows.models import Recipe, RecipeVersion
from workflows.services import recipe_draft_snapshot
from workflows.validators import RecipeRejected

from ...models import RecipeTest
from ...selectors import Coverage, branch_coverage
from ...services import RUN_HERE_TIMEOUT_S, recipe_test_run_here

PASSED, FAILED, ERROR = RecipeTest.Result.PASSED, RecipeTest.Result.FAILED, RecipeTest.Result.ERROR
MARKS = {PASSED: "PASS ", FAILED: "FAIL ", ERROR: "ERROR"}
# What XML 1.0 cannot hold (a model's or tool's text may): left out of the report.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


@dataclass
class Case:
    """One test's outcome: `result` passed, failed or error, with why and how long it took."""

    name: str
    result: str
    message: str = ""
    seconds: float = 0.0
    details: str = ""


@dataclass
class Suite:
    """One recipe's tests, the version they ran and the branches they took."""

    slug: str
    version: str = ""
    cases: list[Case] = field(default_factory=list)
    coverage: Coverage | None = None
    started: str = ""

    def count(self, result: str) -> int:
        return sum(1 for c in self.cases if c.result == result)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.cases)


class Command(BaseCommand):
    verbosity = 1
    help = (
        "Run every recipe test (of the recipes named, or all) as a dry run, print the results "
        "and the branch coverage, and exit 1 if any test fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slugs", nargs="*", metavar="SLUG", help="recipes (default: all)")
        parser.add_argument(
            "--junit-xml", type=Path, default=None, metavar="FILE", help="write a JUnit report"
        )
        parser.add_argument(
            "--draft",
            action="store_true",
            help="run each recipe's saved draft instead of its latest published version",
        )
        parser.add_argument(
            "--user", default=None, help="run as this user (default: each recipe's owner)"
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=RUN_HERE_TIMEOUT_S,
            help=f"seconds one test may run (default {RUN_HERE_TIMEOUT_S:g})",
        )
        parser.add_argument(
            "--min-coverage",
            type=_percent,
            default=None,
            metavar="PCT",
            help="exit 1 when a recipe's tests take less than PCT %% of its branches",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        self.verbosity = int(opts["verbosity"])
        user = None
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user '{opts['user']}'")
        suites = [
            self._suite(slug, recipe, user, draft=opts["draft"], timeout_s=opts["timeout"])
            for slug, recipe in _recipes(opts["slugs"])
        ]
        if opts["junit_xml"] is not None:
            _write_junit(suites, opts["junit_xml"])
        cases = [case for suite in suites for case in suite.cases]
        not_passed = [case for case in cases if case.result != PASSED]
        summary = (
            f"{len(cases)} recipe test{'s' if len(cases) != 1 else ''}: "
            f"{len(cases) - len(not_passed)} passed, "
            f"{sum(1 for c in cases if c.result == FAILED)} failed, "
            f"{sum(1 for c in cases if c.result == ERROR)} could not run"
        )
        if not suites:
            self.stdout.write(self.style.WARNING("No recipe has tests: nothing to run."))
            return
        minimum = opts["min_coverage"]
        short = [] if minimum is None else [s for s in suites if not _covers(s, minimum)]
        if not_passed:
            self.stdout.write(self.style.ERROR(summary))
            raise CommandError(
                f"{len(not_passed)} of {len(cases)} recipe tests did not pass", returncode=1
            )
        if short:
            self.stdout.write(self.style.ERROR(summary))
            raise CommandError(
                f"branch coverage under {minimum:g}%: "
                + ", ".join(f"{s.slug} ({_fraction(s)})" for s in short),
                returncode=1,
            )
        self.stdout.write(self.style.SUCCESS(summary))

    def _suite(
        self,
        slug: str,
        recipe: Recipe | None,
        user: AbstractBaseUser | None,
        *,
        draft: bool,
        timeout_s: float,
    ) -> Suite:
        """Run one recipe's tests, printing a line per test and the recipe's summary."""
        suite = Suite(slug=slug, started=timezone.now().isoformat(timespec="seconds"))
        if recipe is None:
            suite.cases.append(Case("(recipe)", ERROR, f"no recipe '{slug}'"))
            self.stdout.write(self.style.ERROR(f"ERROR {slug}: no recipe '{slug}'"))
            return suite
        runner = user or recipe.owner
        snapshot: RecipeVersion | None = None
        document: dict[str, Any] | None = None
        problem = ""
        if draft:
            try:
                snapshot = recipe_draft_snapshot(recipe=recipe, user=runner)
            except RecipeRejected as exc:
                problem = "the draft cannot run: " + "; ".join(exc.errors)
            else:
                suite.version, document = snapshot.label, snapshot.document
        elif (latest := recipe.latest_version) is not None:
            suite.version, document = latest.label, latest.document
        tests = list(RecipeTest.objects.filter(recipe=recipe).order_by("name"))
        self.stdout.write(f"{recipe.slug} ({suite.version or 'no version'}):")
        for test in tests:
            began = time.monotonic()
            if problem:
                case = Case(test.name, ERROR, problem)
            else:
                recipe_test_run_here(test=test, user=runner, snapshot=snapshot, timeout_s=timeout_s)
                case = Case(test.name, test.last_result, test.last_message, details=_details(test))
            case.seconds = time.monotonic() - began
            suite.cases.append(case)
            line = f"  {MARKS.get(case.result, 'ERROR')} {test.name}"
            if case.message:
                line += f": {case.message}"
            style = self.style.SUCCESS if case.result == PASSED else self.style.ERROR
            self.stdout.write(style(line))
        suite.coverage = branch_coverage(document or document_from_recipe(recipe), tests)
        self._summary(suite)
        return suite

    def _summary(self, suite: Suite) -> None:
        coverage = suite.coverage
        assert coverage is not None
        self.stdout.write(
            f"  {suite.count(PASSED)} passed, {suite.count(FAILED)} failed, "
            f"{suite.count(ERROR)} could not run · branch coverage "
            f"{coverage.covered}/{coverage.total} ({coverage.percent}%)"
        )
        if self.verbosity >= 2:
            for row in coverage.untaken:
                self.stdout.write(f"    not taken: {row.step} → {row.branch} ({row.summary})")


def _percent(text: str) -> float:
    """Read `--min-coverage`: a number from 0 to 100."""
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"'{text}' is not a number") from None
    if not 0 <= value <= 100:
        raise ArgumentTypeError("must be from 0 to 100")
    return value


def _covers(suite: Suite, minimum: float) -> bool:
    """Whether the suite's tests took at least `minimum` % of its branches (exactly: 199 of
    200 is not 100 %). A recipe without branches has nothing to take."""
    coverage = suite.coverage
    if coverage is None:
        return False
    return coverage.total == 0 or 100 * coverage.covered >= minimum * coverage.total


def _fraction(suite: Suite) -> str:
    coverage = suite.coverage
    return f"{coverage.covered}/{coverage.total}" if coverage else "not run"


def _recipes(slugs: list[str]) -> list[tuple[str, Recipe | None]]:
    """Return the recipes named (None for a slug that names none), or every one with tests."""
    if not slugs:
        with_tests = Recipe.objects.filter(tests__isnull=False).distinct().order_by("slug")
        return [(recipe.slug, recipe) for recipe in with_tests.select_related("owner")]
    found = {r.slug: r for r in Recipe.objects.filter(slug__in=slugs).select_related("owner")}
    return [(slug, found.get(slug)) for slug in dict.fromkeys(slugs)]


def _details(test: RecipeTest) -> str:
    """Return what a failure's body shows: the path expected and taken, and the status."""
    return (
        f"expected path: {' → '.join(test.expected_path) or '(none)'}\n"
        f"taken path: {' → '.join(test.last_path) or '(none)'}\n"
        f"expected status: {test.expected_status or 'any'}\n"
        + (f"run: {test.last_run_id}\n" if test.last_run_id else "")
    )


def _write_junit(suites: list[Suite], path: Path) -> None:
    """Write the JUnit XML report: a testsuite per recipe, a testcase per test."""
    cases = [case for suite in suites for case in suite.cases]
    root = ET.Element(
        "testsuites",
        name="recipe tests",
        tests=str(len(cases)),
        failures=str(sum(1 for c in cases if c.result == FAILED)),
        errors=str(sum(1 for c in cases if c.result not in (PASSED, FAILED))),
        time=f"{sum(c.seconds for c in cases):.3f}",
    )
    for suite in suites:
        element = ET.SubElement(
            root,
            "testsuite",
            name=suite.slug,
            tests=str(len(suite.cases)),
            failures=str(suite.count(FAILED)),
            errors=str(len(suite.cases) - suite.count(PASSED) - suite.count(FAILED)),
            skipped="0",
            time=f"{suite.seconds:.3f}",
            timestamp=suite.started,
        )
        properties = ET.SubElement(element, "properties")
        if suite.version:
            ET.SubElement(properties, "property", name="version", value=suite.version)
        if suite.coverage is not None:
            ET.SubElement(
                properties,
                "property",
                name="branch_coverage",
                value=f"{suite.coverage.covered}/{suite.coverage.total}",
            )
        for case in suite.cases:
            testcase = ET.SubElement(
                element,
                "testcase",
                classname=f"recipes.{suite.slug}",
                name=_xml(case.name),
                time=f"{case.seconds:.3f}",
            )
            if case.result == FAILED:
                failure = ET.SubElement(
                    testcase, "failure", message=_xml(case.message), type="path"
                )
                failure.text = _xml(case.details)
            elif case.result != PASSED:
                ET.SubElement(testcase, "error", message=_xml(case.message) or "could not run")
    ET.indent(root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror}") from None


def _xml(text: str) -> str:
    return _NOT_XML.sub("", text)
