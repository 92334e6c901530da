from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows.services import RecipeConflict, recipe_import
from workflows.validators import RecipeRejected


class Command(BaseCommand):
    help = "Import a recipe file (format v1, JSON or YAML)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--owner", default=None, help="username (default: first superuser)")
        parser.add_argument("--replace", action="store_true", help="replace an existing draft")

    def handle(self, *args: Any, file: Path, owner: str | None, replace: bool, **kw: Any) -> None:
        users = get_user_model().objects
        user = (
            users.filter(username=owner).first()
            if owner
            else users.filter(is_superuser=True).order_by("pk").first()
        )
        if user is None:
            raise CommandError(
                f"no user '{owner}'" if owner else "no superuser to own it: pass --owner USERNAME"
            )
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        try:
            result = recipe_import(user=user, data=data, replace=replace)
        except RecipeRejected as exc:
            raise CommandError(
                f"{file} was not imported:\n" + "\n".join(f"  {e}" for e in exc.errors)
            ) from None
        except RecipeConflict as exc:
            raise CommandError(str(exc)) from None
        verb = "Imported" if result.created else "Replaced the draft of"
        self.stdout.write(
            self.style.SUCCESS(f"{verb} '{result.recipe.slug}' ({result.recipe.name})")
        )
        for warning in result.warnings:
            self.stdout.write(self.style.WARNING(f"  warning: {warning}"))
