"""Load the demo: scripted actors, the `editors` reviewer group, two users, the demo recipes and
their tests (through the editor's `seed_demo_tests`), a knowledge base of the project's
documentation and the demo MCP tool server. With `--model-url` the writer, the judge and the
classifier are answered by a real model instead (`make run MODEL=local` starts one on loopback).

Safe to run on every start: actors are updated in place, existing users keep their password
(unless `--reset-password`), a recipe is re-imported and re-published only when its file
changed, and a documentation file is indexed again only when it changed. Passwords are
generated here and printed once; none is stored in the repository.

The command lives in the knowledge app, the lowest layer that sees both recipes and knowledge
bases (`workflows` may not import `knowledge`). The tool server is registered through the tools
app's command (`register_tool_server`): the knowledge and tools apps do not import each other.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from knowledge import ingest
from knowledge.convert import ConversionError
from knowledge.models import Document, KnowledgeBase
from workflows.actor_urls import URLRefused, check_base_url, redact_url, settings_allowlist
from workflows.adapters import document_from_recipe
from workflows.demo import (
    DEMO_USERNAME,
    DOCS_BASE_DESCRIPTION,
    DOCS_BASE_NAME,
    DOCS_BASE_SLUG,
    EMBEDDER,
    REVIEWER_GROUP,
    REVIEWER_USERNAME,
    docs_files,
    recipe_files,
)
from workflows.demo.actors import DEMO_ACTORS, REAL_MODEL_MAX_TOKENS, with_real_model
from workflows.models import Actor, Recipe
from workflows.services import RecipeConflict, recipe_import, recipe_publish, recipe_share
from workflows.validators import RecipeRejected

# The demo user is staff so the admin opens; these apps' permissions let it see their models.
STAFF_APPS = ("workflows", "knowledge", "tools", "runner")
# The demo MCP server (tools/demo_server.py), run over stdio: settings.MCP_STDIO_COMMANDS["demo"].
DEMO_TOOL_SERVER = "demo"
PUBLISH_NOTE = "Published by seed_demo from {file}"


@dataclass
class Summary:
    """What one seeding did, printed at the end (after the transaction committed)."""

    actors_created: list[str] = field(default_factory=list)
    actors_updated: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    recipes: list[str] = field(default_factory=list)
    knowledge: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Command(BaseCommand):
    help = "Create or update the demo actors, reviewers and recipes (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="give the demo and reviewer users new passwords (printed)",
        )
        parser.add_argument(
            "--reset-recipes",
            action="store_true",
            help="replace the demo recipes' drafts with the files (edits are lost)",
        )
        parser.add_argument(
            "--model-url",
            default="",
            help="have the demo's writer, judge and classifier answered by the model at this "
            "OpenAI-compatible server (e.g. http://127.0.0.1:11434/v1); without it they are "
            "scripted again",
        )
        parser.add_argument(
            "--model-name", default="", help="the model those actors ask for (with --model-url)"
        )
        parser.add_argument(
            "--model-key-env",
            default="",
            help="the environment variable holding the server's API key, if it needs one",
        )

    def handle(
        self,
        *args: Any,
        reset_password: bool,
        reset_recipes: bool,
        model_url: str,
        model_name: str,
        model_key_env: str,
        **options: Any,
    ) -> None:
        if model_url and not model_name:
            raise CommandError("--model-url needs --model-name: the model to ask for")
        if model_url:
            # Checked here, once: the demo recipes cannot be imported without these actors.
            try:
                check_base_url(model_url, allowlist=settings_allowlist())
            except URLRefused as exc:
                raise CommandError(f"--model-url: {exc}") from None
        actors = with_real_model(model_url, model_name, model_key_env) if model_url else DEMO_ACTORS
        summary = Summary()
        with transaction.atomic():
            group, _ = Group.objects.get_or_create(name=REVIEWER_GROUP)
            self._seed_actors(actors, summary)
            demo = self._seed_user(
                DEMO_USERNAME, group=group, staff=True, reset=reset_password, summary=summary
            )
            self._seed_user(
                REVIEWER_USERNAME, group=group, staff=False, reset=reset_password, summary=summary
            )
            for path in recipe_files():
                self._seed_recipe(
                    path, owner=demo, group=group, summary=summary, reset=reset_recipes
                )
            self._seed_docs_base(owner=demo, group=group, summary=summary)
        self._print(summary)
        if model_url:
            names = ", ".join(REAL_MODEL_MAX_TOKENS)
            self.stdout.write(f"Answered by {model_name} at {redact_url(model_url)}: {names}")
        # The demo recipes' tests belong to the editor app, which this one may not import.
        call_command("seed_demo_tests", reset=reset_recipes, stdout=self.stdout, stderr=self.stderr)
        # After the commit: discovery starts the server, which takes a moment. A failure is
        # a warning: the rest of the demo works without tools.
        try:
            call_command(
                "register_tool_server",
                DEMO_TOOL_SERVER,
                stdio=DEMO_TOOL_SERVER,
                discover=True,
                stdout=self.stdout,
                stderr=self.stderr,
            )
        except CommandError as exc:
            self.stdout.write(self.style.WARNING(f"  warning: tool server not seeded: {exc}"))

    def _seed_actors(self, actors: list[dict[str, Any]], summary: Summary) -> None:
        for spec in actors:
            actor = Actor.objects.filter(name=spec["name"]).first()
            created = actor is None
            if actor is None:
                actor = Actor(**spec)
            elif any(getattr(actor, field) != value for field, value in spec.items()):
                for field, value in spec.items():
                    setattr(actor, field, value)
            else:
                continue
            try:
                # The checks of the API and the admin: e.g. the Ollama actors' local URL is
                # refused when PROVIDER_URL_ALLOWLIST no longer holds it.
                actor.full_clean()
            except ValidationError as exc:
                problems = "; ".join(
                    f"{field}: {message}"
                    for field, errors in exc.message_dict.items()
                    for message in errors
                )
                summary.warnings.append(f"actor {actor.name} not seeded: {problems}")
                continue
            actor.save()
            (summary.actors_created if created else summary.actors_updated).append(actor.name)

    def _seed_user(
        self, username: str, *, group: Group, staff: bool, reset: bool, summary: Summary
    ) -> AbstractBaseUser:
        users = get_user_model().objects
        user = users.filter(username=username).first()
        password = None
        if user is None:
            password = secrets.token_urlsafe(12)
            user = users.create_user(username=username, password=password)
            status = f"user {username} created, password: {password}"
        elif reset:
            password = secrets.token_urlsafe(12)
            user.set_password(password)
            status = f"user {username} exists, new password: {password}"
        else:
            status = f"user {username} exists (password unchanged; use --reset-password)"
        if staff:
            user.is_staff = True
            user.user_permissions.add(
                *Permission.objects.filter(content_type__app_label__in=STAFF_APPS)
            )
        user.save()
        user.groups.add(group)
        summary.users.append(status)
        return user

    def _seed_recipe(
        self, path: Path, *, owner: AbstractBaseUser, group: Group, summary: Summary, reset: bool
    ) -> None:
        data = path.read_bytes()
        document = json.loads(data)
        recipe = Recipe.objects.filter(slug=document.get("slug")).first()
        if recipe is not None and not reset:
            # The draft may hold the user's edits: never overwrite them unasked.
            latest = recipe.latest_version
            summary.recipes.append(
                f"{recipe.slug} (kept as it is" + (f", v{latest.number})" if latest else ")")
            )
            return
        if recipe is not None and document_from_recipe(recipe) == document:
            state = "unchanged"
        else:
            try:
                result = recipe_import(user=owner, data=data, replace=True)
            except RecipeRejected as exc:
                raise CommandError(
                    f"{path.name} was not imported:\n" + "\n".join(f"  {e}" for e in exc.errors)
                ) from None
            except RecipeConflict as exc:
                raise CommandError(f"{path.name}: {exc}") from None
            recipe = result.recipe
            state = "imported" if result.created else "updated"
            summary.warnings += [f"{recipe.slug}: {w}" for w in result.warnings]
        recipe_share(recipe=recipe, users=[], groups=[group])
        latest = recipe.latest_version
        # Runs start from a published version: publish the first one, and a new one when the
        # file changed since the last published version.
        if latest is None or (state != "unchanged" and latest.document != document):
            latest = recipe_publish(
                recipe=recipe, user=owner, note=PUBLISH_NOTE.format(file=path.name)
            )
            state += f", published v{latest.number}"
        else:
            state += f", v{latest.number}"
        summary.recipes.append(f"{recipe.slug} ({state})")

    def _seed_docs_base(self, *, owner: AbstractBaseUser, group: Group, summary: Summary) -> None:
        """Index the project's docs in the demo knowledge base, each file again when it changed.

        Ingestion runs here rather than on a worker, so that the base is searchable as soon
        as the command ends. The base's settings, once created, are the user's to change.
        """
        base = KnowledgeBase.objects.filter(slug=DOCS_BASE_SLUG).first()
        if base is None:
            base = ingest.create_base(
                owner=owner,
                slug=DOCS_BASE_SLUG,
                name=DOCS_BASE_NAME,
                description=DOCS_BASE_DESCRIPTION,
                embedding_actor=Actor.objects.filter(name=EMBEDDER).first(),
            )
        elif base.owner_id != owner.pk:
            summary.warnings.append(
                f"knowledge base {DOCS_BASE_SLUG} belongs to another user: left as it is"
            )
            return
        ingest.share_base(base, users=[], groups=[group])
        added = 0
        for path in docs_files():
            try:
                document, created = ingest.add_document(
                    base, owner, path.name, path.read_bytes(), "text/markdown"
                )
            except ConversionError as exc:
                summary.warnings.append(f"{DOCS_BASE_SLUG}: {path.name} not added: {exc}")
                continue
            if created:
                added += 1
                # The file changed: its earlier version goes.
                for old in base.documents.filter(filename=document.filename).exclude(
                    pk=document.pk
                ):
                    ingest.delete_document(old)
            if document.status != Document.Status.READY:
                if not created:
                    ingest.requeue(Document.objects.filter(pk=document.pk))
                ingest.ingest_document(document.pk)
                document.refresh_from_db()
            if document.status == Document.Status.FAILED:
                summary.warnings.append(
                    f"{DOCS_BASE_SLUG}: {path.name} not indexed: {document.error}"
                )
        documents = base.documents.count()
        chunks = base.chunks.count()
        summary.knowledge.append(
            f"{DOCS_BASE_SLUG} ({documents} documents, {chunks} chunks; {added} indexed now)"
        )

    def _print(self, summary: Summary) -> None:
        out = self.stdout
        out.write(
            f"Demo actors: {len(DEMO_ACTORS)} ({len(summary.actors_created)} created, "
            f"{len(summary.actors_updated)} updated)"
        )
        out.write(f"Reviewer group: {REVIEWER_GROUP}")
        for line in summary.users:
            out.write(self.style.SUCCESS(line) if "password:" in line else line)
        out.write(f"Demo recipes ({len(summary.recipes)}):")
        for line in summary.recipes:
            out.write(f"  {line}")
        out.write(f"Demo knowledge bases ({len(summary.knowledge)}):")
        for line in summary.knowledge:
            out.write(f"  {line}")
        for warning in summary.warnings:
            out.write(self.style.WARNING(f"  warning: {warning}"))
