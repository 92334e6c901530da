from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from knowledge import search
from knowledge.models import KnowledgeBase
from knowledge.selectors import readable_base
from workflows.engine.sources import DEFAULT_MODE, DEFAULT_TOP_K, MAX_TOP_K, MODES

SHOWN_CHARS = 300


class Command(BaseCommand):
    help = (
        "Search a knowledge base and print the hits, best first. An administrator's tool: it "
        "searches as --user (default: the base's owner), who must be allowed to read the base."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("query")
        parser.add_argument("--mode", choices=MODES, default=DEFAULT_MODE)
        parser.add_argument("--top-k", type=int, default=DEFAULT_TOP_K, dest="top_k")
        parser.add_argument("--min-score", type=float, default=0.0, dest="min_score")
        parser.add_argument(
            "--user", default=None, help="search as this user (default: the base's owner)"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        base = self._base(opts["slug"], opts["user"])
        if not 1 <= opts["top_k"] <= MAX_TOP_K:
            raise CommandError(f"--top-k is from 1 to {MAX_TOP_K}")
        if not 0.0 <= opts["min_score"] <= 1.0:
            raise CommandError("--min-score is from 0 to 1")
        try:
            hits = search.search(
                base,
                opts["query"],
                mode=opts["mode"],
                top_k=opts["top_k"],
                min_score=opts["min_score"],
            )
        except search.SearchError as exc:
            raise CommandError(str(exc)) from None
        if not hits:
            self.stdout.write("no hits")
            return
        for number, hit in enumerate(hits, start=1):
            where = f"{hit.document_title} › {hit.heading}" if hit.heading else hit.document_title
            self.stdout.write(self.style.SUCCESS(f"[{number}] {hit.score:.3f} {where}"))
            text = " ".join(hit.text.split())
            if len(text) > SHOWN_CHARS:
                text = text[: SHOWN_CHARS - 1] + "…"
            self.stdout.write(f"    {text}")

    def _base(self, slug: str, username: str | None) -> KnowledgeBase:
        """Return the base `slug`, if there is one that the user searching may read."""
        if username is None:
            base = KnowledgeBase.objects.filter(slug=slug).first()
            if base is None:
                raise CommandError(f"no knowledge base '{slug}'")
            return base
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user '{username}'")
        base = readable_base(user, slug)
        if base is None:
            raise CommandError(f"no knowledge base '{slug}' that user '{username}' may read")
        return base
