from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from knowledge import search
from knowledge.models import KnowledgeBase

SHOWN_CHARS = 300


class Command(BaseCommand):
    help = "Search a knowledge base and print the hits, best first."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("query")
        parser.add_argument("--mode", choices=["hybrid", "fulltext", "semantic"], default="hybrid")
        parser.add_argument("--top-k", type=int, default=5, dest="top_k")
        parser.add_argument("--min-score", type=float, default=0.0, dest="min_score")

    def handle(self, *args: Any, **opts: Any) -> None:
        base = KnowledgeBase.objects.filter(slug=opts["slug"]).first()
        if base is None:
            raise CommandError(f"no knowledge base '{opts['slug']}'")
        if not 1 <= opts["top_k"] <= 50:
            raise CommandError("--top-k is from 1 to 50")
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
