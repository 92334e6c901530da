from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate

from knowledge.fulltext import repair_sqlite_triggers


class KnowledgeConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "knowledge"
    verbose_name = "Knowledge bases"

    def ready(self) -> None:
        post_migrate.connect(_repair_fulltext_index, sender=self)


def _repair_fulltext_index(using: str = "default", **kwargs: Any) -> None:
    """Give the SQLite full-text index back any trigger a table copy in a migration dropped."""
    repair_sqlite_triggers(using)
