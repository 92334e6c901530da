"""Published recipe versions as the runner reads them: parsed once per process."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from workflows import engine
from workflows.models import RecipeVersion


@lru_cache(maxsize=128)
def version_graph(version_id: int, created_at: object) -> tuple[engine.RecipeGraph, dict[str, Any]]:
    """Load and parse a published version once per process (versions never change).

    Keyed by creation time too: a test database may give a rolled-back version's id to another.
    """
    document = RecipeVersion.objects.values_list("document", flat=True).get(pk=version_id)
    return engine.parse_recipe(document), document
