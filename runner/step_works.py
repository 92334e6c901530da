"""What works on one recipe step: each actor and prompt variant's record, the arm the learner
would pick by that record now, and the choices it made — the figures of the step's
"what works" page.

Selectors only. The records count the step's attempts in the runs the user may see (all the
recipe's runs: whoever may see a recipe may see its runs), judged as the learner judges them
(`actor_stats.SUCCESS` / `FAILURE`); an attempt that is neither (its run still going, or a
neutral branch in a run that ended otherwise) is counted apart. The weighted rate and the pick
are the learner's own (`engine.learner.gather` and `choose`) over the evidence it reads
(`actor_stats.observations`), with exploration off: what it would exploit, not what a draw
might try.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import BooleanField, Case, Count, F, Q, Sum, Value, When
from django.db.models.functions import Coalesce

from workflows import engine
from workflows.adapters import document_from_recipe
from workflows.engine import actor_choice
from workflows.engine.actor_choice import evidence_of, learns
from workflows.engine.graph import RecipeGraph, StepSpec
from workflows.engine.learner import (
    Arm,
    ArmEvidence,
    Choice,
    LearnerSettings,
    choose,
    gather,
)
from workflows.models import Recipe

from . import stats
from .steps.actor_stats import FAILURE, SUCCESS, observations
from .versions import version_graph

# The choices listed under the figures, newest first.
RECENT_CHOICES = 10
# How the learner counts an attempt: a success, a failure, or neither (None).
JUDGED = Case(
    When(SUCCESS, then=Value(True)),
    When(FAILURE, then=Value(False)),
    default=None,
    output_field=BooleanField(null=True),
)
OWN_PROMPT = "own prompt"


class StepUnknown(LookupError):
    """The recipe has no such step, or it is not one whose actors can be compared."""


def recipe_graph(recipe: Recipe) -> RecipeGraph | None:
    """Return the recipe as new runs use it: its latest published version, else its draft
    (None: the draft does not parse)."""
    version = recipe.latest_version
    if version is not None:
        return version_graph(version.pk, version.created_at)[0]
    try:
        return engine.parse_recipe(document_from_recipe(recipe))
    except engine.RecipeInvalid:
        return None


def llm_steps(graph: RecipeGraph | None) -> list[StepSpec]:
    """Return the steps with a "what works" page: the LLM steps, in sequence order."""
    return [s for s in graph.steps if s.kind == "llm"] if graph else []


def arm_label(actor: str, variant: str) -> str:
    """Name an arm for people: `coder · own prompt`, `coder · numbers only`."""
    return f"{actor} · {variant or OWN_PROMPT}"


@dataclass(frozen=True)
class ArmRecord:
    """One actor and variant on the step: its attempts, how they were judged, its means."""

    actor: str
    variant: str
    attempts: int  # every attempt, judged or not
    successes: int
    failures: int
    weighted_rate: float  # the learner's decayed posterior mean (0.5 with no evidence)
    mean_latency_ms: float | None
    mean_cost: float | None
    mean_tokens: float | None
    # The learner chooses among this arm now (False: only earlier attempts name it).
    candidate: bool
    picked: bool = False

    @property
    def label(self) -> str:
        return arm_label(self.actor, self.variant)

    @property
    def judged(self) -> int:
        return self.successes + self.failures

    @property
    def unjudged(self) -> int:
        return self.attempts - self.judged

    @property
    def success_rate(self) -> float | None:
        """Successes among judged attempts, unweighted (None: none judged)."""
        return self.successes / self.judged if self.judged else None


@dataclass(frozen=True)
class ChoiceRecord:
    """A choice the learner made on the step, with the attempt it chose."""

    run_id: int
    seq: int
    actor: str
    variant: str
    outcome: str  # the branch's word: success, failure, neutral ("" on old rows)
    judged: bool | None  # how the learner counts it (None: not yet, or neither)
    rule: str
    explored: bool
    reason: str
    started_at: datetime | None

    @property
    def label(self) -> str:
        return arm_label(self.actor, self.variant)


@dataclass(frozen=True)
class StepWorks:
    """The step's "what works" figures."""

    step: StepSpec
    learning: LearnerSettings
    # Whether the learner chooses each visit's first attempt (`@learned` or `variants`); if
    # not, it chooses only a retry with another actor.
    learns: bool
    arms: list[ArmRecord]
    pick: Choice | None  # the arm the learner would exploit now (None: no attempt yet)
    # Candidates with less evidence than `learning.min_evidence`: with exploration on, they
    # are tried before the learner exploits.
    unproven: list[str]
    choices: list[ChoiceRecord]

    @property
    def attempts(self) -> int:
        return sum(a.attempts for a in self.arms)

    @property
    def unjudged(self) -> int:
        return sum(a.unjudged for a in self.arms)

    @property
    def pick_record(self) -> ArmRecord | None:
        return next((a for a in self.arms if a.picked), None)

    @property
    def candidate_actors(self) -> list[str]:
        """The actors the learner chooses among, in the order it ranks ties."""
        return list(dict.fromkeys(a.actor for a in self.arms if a.candidate))

    @property
    def candidate_variants(self) -> list[str]:
        """The prompts the learner chooses among ("": the step's own)."""
        return list(dict.fromkeys(a.variant for a in self.arms if a.candidate))


def step_works(
    *,
    user: AbstractBaseUser | AnonymousUser,
    recipe: Recipe,
    graph: RecipeGraph | None,
    key: str,
) -> StepWorks:
    """Return what works on the recipe's LLM step `key`; raise StepUnknown if it has none."""
    if graph is None or not graph.has_step(key):
        raise StepUnknown(f"The recipe '{recipe.slug}' has no step '{key}'.")
    step = graph.step(key)
    if step.kind != "llm":
        raise StepUnknown(
            f"The step '{key}' is a {step.kind} step: only LLM steps have actors and prompt "
            "variants to compare."
        )
    step_learns = learns(step)
    evidence = evidence_of(step, observations(recipe.pk, key))
    candidates = actor_choice.arms(graph, step, evidence)
    rows = _attempt_rows(user=user, recipe=recipe, key=key, by_variant=step_learns)
    known = [*candidates, *(arm for arm in rows if arm not in candidates)]
    weighted = {e.arm: e for e in gather(known, evidence, graph.learning.half_life)}
    # Exploit only, so the page shows the learner's best guess, not one draw's luck.
    settings = replace(graph.learning, explore=False)
    pick = (
        choose(candidates, evidence, settings=settings, rng=random.Random(0))
        if rows and candidates
        else None
    )
    arms = [_record(arm, rows.get(arm), weighted[arm], arm in candidates, pick) for arm in known]
    unproven = [
        arm_label(e.arm.actor, e.arm.variant)
        for arm, e in weighted.items()
        if arm in candidates and e.attempts < graph.learning.min_evidence
    ]
    return StepWorks(
        step=step,
        learning=graph.learning,
        learns=step_learns,
        arms=arms,
        pick=pick,
        unproven=unproven,
        choices=_recent_choices(user=user, recipe=recipe, key=key),
    )


@dataclass
class _Sums:
    attempts: int = 0
    successes: int = 0
    failures: int = 0
    latency: tuple[int, int] = (0, 0)  # (sum, how many had a value)
    cost: tuple[float, int] = (0.0, 0)
    tokens: tuple[int, int] = (0, 0)

    def add(self, row: dict[str, Any]) -> None:
        self.attempts += row["attempts"]
        self.successes += row["successes"]
        self.failures += row["failures"]
        self.latency = _plus(self.latency, row["latency_sum"], row["latency_n"])
        self.cost = _plus(self.cost, float(row["cost_sum"] or 0), row["cost_n"])
        self.tokens = _plus(self.tokens, row["tokens_sum"], row["tokens_n"])


def _plus(total: tuple[Any, int], value: Any, n: int) -> tuple[Any, int]:
    return (total[0] + (value or 0), total[1] + n)


def _mean(total: tuple[Any, int]) -> float | None:
    return total[0] / total[1] if total[1] else None


def _attempt_rows(
    *, user: AbstractBaseUser | AnonymousUser, recipe: Recipe, key: str, by_variant: bool
) -> dict[Arm, _Sums]:
    """Count the step's attempts per arm, in the runs the user may see, and sum their
    latency, cost and tokens (with how many had each) for the means."""
    tokens = F("tokens_in") + Coalesce(F("tokens_out"), 0)
    has_tokens = Q(tokens_in__isnull=False)
    rows = (
        stats.recipe_scope(user=user, recipe=recipe)
        .steps.filter(kind="llm", step_key=key)
        .exclude(actor_alias="")
        .order_by()
        .values("actor_alias", "variant")
        .annotate(
            attempts=Count("id"),
            successes=Count("id", filter=SUCCESS),
            failures=Count("id", filter=FAILURE),
            latency_sum=Sum("latency_ms"),
            latency_n=Count("latency_ms"),
            cost_sum=Sum("cost"),
            cost_n=Count("cost"),
            tokens_sum=Sum(tokens, filter=has_tokens),
            tokens_n=Count("id", filter=has_tokens),
        )
    )
    sums: dict[Arm, _Sums] = {}
    for row in rows:
        arm = Arm(row["actor_alias"], row["variant"] if by_variant else "")
        sums.setdefault(arm, _Sums()).add(row)
    # Most attempts first, then by name: the arms the learner no longer offers come last anyway.
    return dict(sorted(sums.items(), key=lambda item: (-item[1].attempts, item[0].actor)))


def _record(
    arm: Arm, sums: _Sums | None, evidence: ArmEvidence, candidate: bool, pick: Choice | None
) -> ArmRecord:
    sums = sums or _Sums()
    return ArmRecord(
        actor=arm.actor,
        variant=arm.variant,
        attempts=sums.attempts,
        successes=sums.successes,
        failures=sums.failures,
        weighted_rate=evidence.mean,
        mean_latency_ms=_mean(sums.latency),
        mean_cost=_mean(sums.cost),
        mean_tokens=_mean(sums.tokens),
        candidate=candidate,
        picked=pick is not None and pick.arm == arm,
    )


def _recent_choices(
    *, user: AbstractBaseUser | AnonymousUser, recipe: Recipe, key: str
) -> list[ChoiceRecord]:
    """Return the learner's latest choices on the step, newest first."""
    rows = (
        stats.recipe_scope(user=user, recipe=recipe)
        .steps.filter(step_key=key, choice__isnull=False)
        .annotate(judged=JUDGED)
        .order_by("-pk")
        .values_list(
            "run_id", "seq", "actor_alias", "variant", "outcome", "judged", "choice", "started_at"
        )
    )[:RECENT_CHOICES]
    records = []
    for run_id, seq, actor, variant, outcome, judged, choice, started_at in rows:
        choice = choice if isinstance(choice, dict) else {}
        records.append(
            ChoiceRecord(
                run_id=run_id,
                seq=seq,
                actor=actor,
                variant=variant,
                outcome=outcome,
                judged=judged,
                rule=str(choice.get("rule", "")),
                explored=bool(choice.get("explored")),
                reason=str(choice.get("reason", "")),
                started_at=started_at,
            )
        )
    return records
