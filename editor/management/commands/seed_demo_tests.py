"""`manage.py seed_demo_tests [--reset]`: save the demo recipes' tests (`seed_demo` calls it).

Each file `workflows/demo/recipe_tests/SLUG.json` holds the tests of the demo recipe SLUG: a
list of `{"name", "inputs", "script", "expected_path", "expected_status"}`, together taking
every branch of the recipe (`manage.py test_recipes --min-coverage 100` holds them to that).
A test already saved under its name is kept as it is (it may hold the user's edits) unless
`--reset`. The command lives in the editor app, which owns recipe tests: `seed_demo` (in the
knowledge app, below the editor) calls it by name.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from workflows.demo import recipe_test_files
from workflows.models import Recipe

from ...models import RecipeTest

FIELDS = ("inputs", "script", "expected_path", "expected_status")


class Command(BaseCommand):
    help = "Save the demo recipes' tests (idempotent; --reset replaces edited ones)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset", action="store_true", help="replace saved demo tests with the files"
        )

    def handle(self, *args: Any, reset: bool, **options: Any) -> None:
        lines = []
        with transaction.atomic():
            for path in recipe_test_files():
                recipe = Recipe.objects.filter(slug=path.stem).first()
                if recipe is None:
                    lines.append(f"  {path.stem}: no such recipe, tests not seeded")
                    continue
                try:
                    tests = _read(json.loads(path.read_text()))
                except (ValueError, TypeError) as exc:
                    raise CommandError(f"{path.name}: {exc}") from None
                created = 0
                for spec in tests:
                    defaults = {field: spec[field] for field in FIELDS}
                    if reset:
                        _, new = RecipeTest.objects.update_or_create(
                            recipe=recipe, name=spec["name"], defaults=defaults
                        )
                    else:
                        _, new = RecipeTest.objects.get_or_create(
                            recipe=recipe,
                            name=spec["name"],
                            defaults={**defaults, "created_by": recipe.owner},
                        )
                    created += new
                lines.append(f"  {recipe.slug} ({len(tests)} tests, {created} new)")
        self.stdout.write(f"Demo recipe tests ({len(lines)} recipes):")
        for line in lines:
            self.stdout.write(line)


def _read(data: object) -> list[dict[str, Any]]:
    """Return a test file's tests, checked, with their optional fields filled in."""
    if not isinstance(data, list):
        raise ValueError("must be a list of tests")
    tests = []
    for number, spec in enumerate(data, start=1):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ValueError(f"test {number}: must be an object with a name")
        if not isinstance(spec.get("expected_path"), list):
            raise ValueError(f"test {spec['name']}: expected_path must be a list of step keys")
        tests.append(
            {
                "name": spec["name"],
                "inputs": spec.get("inputs", {}),
                "script": spec.get("script", {}),
                "expected_path": spec["expected_path"],
                "expected_status": spec.get("expected_status", ""),
            }
        )
    return tests
