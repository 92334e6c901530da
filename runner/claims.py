"""What a worker holds while it runs one step: the claim, and the step's outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from django.conf import settings

from workflows import engine
from workflows.models import RecipeVersion

from . import actors
from .models import HumanTask

TOKEN_PUSH_INTERVAL_S = 0.1
SCRIPTED_TIMEOUT = "@timeout"  # a dry-run script's way to let a human task time out


def lease_seconds() -> int:
    return settings.RUN_LEASE_SECONDS


@lru_cache(maxsize=128)
def version_graph(version_id: int, created_at: object) -> tuple[engine.RecipeGraph, dict[str, Any]]:
    """Load and parse a published version once per process (versions never change).

    Keyed by creation time too: a test database may give a rolled-back version's id to another.
    """
    document = RecipeVersion.objects.values_list("document", flat=True).get(pk=version_id)
    return engine.parse_recipe(document), document


@dataclass
class Claim:
    run_id: int
    token: str
    seq: int
    attempt: int
    step: engine.StepSpec
    graph: engine.RecipeGraph
    document: dict[str, Any]
    state: engine.RunState
    directive: dict[str, Any]
    calls: dict[str, int]
    script: dict[str, Any] | None
    recipe_id: int
    owner_id: int
    # The run's event_seq once the claim is committed: the commit numbers its events from it.
    event_seq: int = 0
    # Actors resolved in this time slice, by alias (looked up once per slice, not per step).
    resolved: dict[str, actors.ResolvedActor] = field(default_factory=dict)


@dataclass
class StepOutcome:
    status: str
    prompt: str = ""
    response: str = ""
    decision: str = ""
    error: str = ""
    timed_out: bool = False
    actor_alias: str = ""
    actor_name: str = ""
    latency_ms: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    confidence: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    started_at: Any = None
    leaf: str | None = None
    route_selection: tuple[str, ...] | None = None
    task: HumanTask | None = None  # resumed human step
    scripted_decision: str | None = None  # dry run: the script decides the human step
    human_group_id: int | None = None
    material: str = ""  # what reviewers read beside the question
