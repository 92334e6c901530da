from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from knowledge import ingest
from knowledge.convert import ConversionError
from knowledge.models import Document, KnowledgeBase

DONE = (Document.Status.READY, Document.Status.FAILED)


class Command(BaseCommand):
    help = (
        "Add files (text, Markdown, HTML, PDF, DOCX) to a knowledge base; --wait follows "
        "their ingestion."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
        parser.add_argument(
            "--create", action="store_true", help="create the knowledge base if there is none"
        )
        parser.add_argument(
            "--user",
            default=None,
            help="the uploader, who must be allowed to change the base, and the owner of a base "
            "--create makes (default: the base's owner, or the first superuser)",
        )
        parser.add_argument("--wait", action="store_true", help="wait until every file is ingested")
        parser.add_argument("--timeout", type=float, default=600, help="seconds to wait at most")

    def handle(self, *args: Any, **opts: Any) -> None:
        base = KnowledgeBase.objects.filter(slug=opts["slug"]).select_related("owner").first()
        if base is None and not opts["create"]:
            raise CommandError(f"no knowledge base '{opts['slug']}' (--create makes it)")
        user = self._user(opts["user"], base)
        if base is not None and not user.has_perm("knowledge.change_knowledgebase", base):
            raise CommandError(
                f"user '{user.get_username()}' may not add files to knowledge base "
                f"'{base.slug}' (it is neither theirs nor shared with them)"
            )
        if base is None:
            base = self._create(opts["slug"], user)
        queued: list[tuple[str, Document]] = []
        failures = 0
        for path in opts["files"]:
            try:
                data = path.read_bytes()
            except OSError as exc:
                self.stdout.write(self.style.ERROR(f"error: {path}: {exc.strerror or exc}"))
                failures += 1
                continue
            try:
                document, created = ingest.add_document(base, user, path.name, data)
            except ConversionError as exc:
                self.stdout.write(self.style.ERROR(f"error: {path}: {exc}"))
                failures += 1
                continue
            if created:
                self.stdout.write(
                    self.style.SUCCESS(f"added: {path} (document {document.pk}, {document.format})")
                )
                queued.append((str(path), document))
            else:
                self.stdout.write(f"already there: {path} (document {document.pk})")
        if queued and settings.EMBEDDED_WORKER:
            # Without Redis the queue lives in this process, where no worker listens.
            self.stdout.write("no REDIS_URL: ingesting here")
            for name, document in queued:
                ingest.ingest_document(document.pk)
                failures += self._report(name, document)
        elif queued and opts["wait"]:
            failures += self._follow(queued, opts["timeout"])
        if failures:
            raise CommandError(f"{failures} of {len(opts['files'])} file(s) failed")

    def _user(self, username: str | None, base: KnowledgeBase | None) -> Any:
        users = get_user_model().objects
        if username:
            user = users.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user '{username}'")
            return user
        if base is not None:
            return base.owner
        user = users.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError("no superuser to own the knowledge base: pass --user USERNAME")
        return user

    def _create(self, slug: str, owner: Any) -> KnowledgeBase:
        name = slug.replace("-", " ").replace("_", " ").strip().capitalize() or slug
        try:
            base = ingest.create_base(owner=owner, slug=slug, name=name)
        except ingest.SettingsInvalid as exc:
            raise CommandError("cannot create it: " + "; ".join(exc.errors)) from None
        except ingest.BaseConflict as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"created knowledge base '{slug}' (owner {owner.get_username()})")
        return base

    def _follow(self, queued: list[tuple[str, Document]], timeout: float) -> int:
        """Print each document's progress until all are ready or failed; return the failures."""
        shown: dict[int, str] = {}
        pending = dict(queued)
        failures = 0
        deadline = time.monotonic() + timeout
        while pending:
            for name, document in list(pending.items()):
                document.refresh_from_db(fields=["status", "chunks_done", "chunks_total", "error"])
                line = f"  {name}: {document.status} {document.progress}%"
                if document.chunks_total:
                    line += f" ({document.chunks_done}/{document.chunks_total} chunks)"
                if document.status not in DONE and shown.get(document.pk) != line:
                    shown[document.pk] = line
                    self.stdout.write(line)
                if document.status in DONE:
                    failures += self._report(name, document)
                    del pending[name]
            if pending and time.monotonic() > deadline:
                raise CommandError(
                    f"{len(pending)} file(s) still being ingested after {timeout:.0f} s; "
                    "it goes on without this command"
                )
            if pending:
                time.sleep(0.2)
        return failures

    def _report(self, name: str, document: Document) -> int:
        document.refresh_from_db(fields=["status", "chunks_done", "chunks_total", "error"])
        if document.status == Document.Status.READY:
            self.stdout.write(
                self.style.SUCCESS(f"ready: {name} ({document.chunks_total} chunks) 100%")
            )
            return 0
        self.stdout.write(self.style.ERROR(f"failed: {name}: {document.error or document.status}"))
        return 1
