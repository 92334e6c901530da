"""Choose a step's actor and prompt variant from what earlier attempts of the step achieved.

Each candidate (actor, variant) is an arm. Its evidence is the outcomes of the step's earlier
attempts with it (`Observation`, newest first), each weighing half as much `half_life`
attempts later, so a model that got better or worse is noticed. The choice:

1. Only arms whose actor has capacity now, unless none has (the step then waits for one).
2. With exploration on, an arm with less than `min_evidence` judged attempts is tried first
   (the least tried), so every arm gets a fair hearing before any is preferred.
3. With exploration on, Thompson sampling: each arm draws from Beta(1 + successes,
   1 + failures) and the highest draw wins; an arm with little evidence draws widely, so it is
   still tried now and then. With exploration off, the highest mean (1 + s) / (2 + s + f).
4. Ties (scores within `TIE`) go to the cheaper arm: mean cost per attempt, else mean
   tokens, then the order given.

The draws come from a `random.Random` the caller seeds (the runner: run, step and attempt), so
a run's choices are the same every time it is replayed or tested. Every choice keeps its
reason: each arm's evidence, what it scored, and whether the pick explored.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.checks import is_int

DEFAULT_MIN_EVIDENCE = 3
DEFAULT_HALF_LIFE = 50
MAX_HALF_LIFE = 100_000
# A variant learned from a repeat's suffix is named by the suffix after this mark: its
# prompt is the step's prompt with the suffix appended, as the repeat asked.
SUFFIX_MARK = "+ "
MAX_VARIANT_NAME = 200
MAX_VARIANTS = 20  # per step: each is an arm per candidate actor, and evidence spreads thin
MAX_CANDIDATES = 50

# Scores this close are a tie, which the cheaper arm wins.
TIE = 0.01

RULE_EVIDENCE = "gathering evidence"
RULE_SAMPLED = "Thompson sampling"
RULE_BEST = "best success rate"


@dataclass(frozen=True, slots=True)
class LearnerSettings:
    """A recipe's `learning` settings: whether to explore, how much evidence before
    exploiting, and after how many attempts evidence weighs half."""

    explore: bool = True
    min_evidence: int = DEFAULT_MIN_EVIDENCE
    half_life: int = DEFAULT_HALF_LIFE
    # Share the strategies its steps learn with the owner's other sharing recipes, by intent
    # pattern (`{learned_strategies}`); off: a recipe sees only its own.
    share: bool = False


DEFAULT_SETTINGS = LearnerSettings()


def parse_learning(value: object, error: Callable[[str, str], None]) -> LearnerSettings:
    """Read a recipe's `learning` object; report each bad field at its path."""
    if value is None:
        return DEFAULT_SETTINGS
    if not isinstance(value, Mapping):
        error("learning", f"must be an object, got {type(value).__name__}")
        return DEFAULT_SETTINGS
    for key in value:
        if key not in ("explore", "min_evidence", "half_life", "share"):
            error(
                f"learning.{key}",
                "unknown field; expected explore, min_evidence, half_life, share",
            )
    explore = value.get("explore", True)
    if not isinstance(explore, bool):
        error("learning.explore", f"must be true or false, got {explore!r}")
        explore = True
    min_evidence = value.get("min_evidence", DEFAULT_MIN_EVIDENCE)
    if not is_int(min_evidence) or not 0 <= min_evidence <= 1000:
        error(
            "learning.min_evidence", f"must be a whole number from 0 to 1000, got {min_evidence!r}"
        )
        min_evidence = DEFAULT_MIN_EVIDENCE
    half_life = value.get("half_life", DEFAULT_HALF_LIFE)
    if not is_int(half_life) or not 1 <= half_life <= MAX_HALF_LIFE:
        error(
            "learning.half_life",
            f"must be a whole number of attempts from 1 to {MAX_HALF_LIFE}, got {half_life!r}",
        )
        half_life = DEFAULT_HALF_LIFE
    share = value.get("share", False)
    if not isinstance(share, bool):
        error("learning.share", f"must be true or false, got {share!r}")
        share = False
    return LearnerSettings(explore, min_evidence, half_life, share)


@dataclass(frozen=True, slots=True)
class Observation:
    """One judged attempt of the step: who answered, with which variant, and how it went."""

    actor: str
    variant: str
    success: bool
    latency_ms: float | None = None
    cost: float | None = None
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Arm:
    """A candidate: an actor alias and a prompt variant ("": the step's own prompt)."""

    actor: str
    variant: str = ""


@dataclass(slots=True)
class ArmEvidence:
    """What is known of an arm: decayed successes and failures, raw attempts, means."""

    arm: Arm
    successes: float = 0.0
    failures: float = 0.0
    attempts: int = 0
    wins: int = 0  # successes among `attempts`, not weighted
    mean_latency_ms: float | None = None
    mean_cost: float | None = None
    mean_tokens: float | None = None
    has_capacity: bool = True
    score: float | None = None  # the draw (sampling) or the mean (best rate) it was ranked by

    @property
    def mean(self) -> float:
        """The posterior mean success rate, 0.5 for an arm never judged."""
        return (1 + self.successes) / (2 + self.successes + self.failures)

    def as_json(self) -> dict[str, Any]:
        return {
            "actor": self.arm.actor,
            "variant": self.arm.variant,
            "successes": round(self.successes, 3),
            "failures": round(self.failures, 3),
            "attempts": self.attempts,
            "wins": self.wins,
            "rate": round(self.mean, 3),
            "mean_latency_ms": _rounded(self.mean_latency_ms),
            "mean_cost": _rounded(self.mean_cost, 8),
            "mean_tokens": _rounded(self.mean_tokens),
            "has_capacity": self.has_capacity,
            "score": _rounded(self.score, 3),
        }


def _rounded(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True, slots=True)
class Choice:
    """The arm chosen, by which rule, whether that explored, and every arm's evidence."""

    arm: Arm
    rule: str
    explored: bool
    evidence: tuple[ArmEvidence, ...] = field(default=())
    # The actors left out before choosing, each with why (a capability the step requires).
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def reason(self) -> str:
        """One line for people: what was picked, and why (and which actors were skipped)."""
        picked = next(e for e in self.evidence if e.arm == self.arm)
        what = label(self.arm)
        record = f"{picked.wins} of {picked.attempts} attempts succeeded"
        skipped = "".join(f"; skipped {why}" for _, why in self.skipped)
        if self.rule == RULE_EVIDENCE:
            return f"{what}: {RULE_EVIDENCE}, {record}{skipped}"
        tail = "explored" if self.explored else "exploited"
        return f"{what}: {self.rule}, {record}, weighted rate {picked.mean:.2f} ({tail}){skipped}"

    def as_json(self) -> dict[str, Any]:
        return {
            "actor": self.arm.actor,
            "variant": self.arm.variant,
            "rule": self.rule,
            "explored": self.explored,
            "reason": self.reason,
            "evidence": [e.as_json() for e in self.evidence],
            **(
                {"skipped": [{"actor": a, "reason": why} for a, why in self.skipped]}
                if self.skipped
                else {}
            ),
        }


def label(arm: Arm) -> str:
    """Name an arm for people: `actor` or `actor with variant`."""
    return f"{arm.actor} with {arm.variant}" if arm.variant else arm.actor


def suffix_variant(suffix: str) -> str | None:
    """Name the variant a repeat's suffix makes (None: too long to name it)."""
    name = f"{SUFFIX_MARK}{suffix.strip()}"
    return name if suffix.strip() and len(name) <= MAX_VARIANT_NAME else None


def learned_variants(observations: Iterable[Observation]) -> list[str]:
    """The suffix variants that led to a success at least once, in the order first seen."""
    seen: dict[str, None] = {}
    for o in observations:
        if o.success and o.variant.startswith(SUFFIX_MARK):
            seen.setdefault(o.variant)
    return list(seen)


def gather(
    arms: Sequence[Arm], observations: Iterable[Observation], half_life: int
) -> list[ArmEvidence]:
    """Each arm's evidence, observations weighted by age (newest first: weight 1)."""
    by_arm = {arm: ArmEvidence(arm) for arm in arms}
    sums: dict[Arm, list[float]] = {arm: [0.0, 0.0, 0.0, 0, 0, 0] for arm in arms}
    decay = 0.5 ** (1 / half_life)
    weight = 1.0
    for o in observations:
        arm = Arm(o.actor, o.variant)
        evidence = by_arm.get(arm)
        if evidence is not None:
            if o.success:
                evidence.successes += weight
                evidence.wins += 1
            else:
                evidence.failures += weight
            evidence.attempts += 1
            totals = sums[arm]
            for i, value in enumerate((o.latency_ms, o.cost, o.tokens)):
                if value is not None:
                    totals[i] += value
                    totals[i + 3] += 1
        weight *= decay
    for arm, evidence in by_arm.items():
        totals = sums[arm]
        means = [totals[i] / totals[i + 3] if totals[i + 3] else None for i in range(3)]
        evidence.mean_latency_ms, evidence.mean_cost, evidence.mean_tokens = means
    return list(by_arm.values())


def _cheapness(evidence: ArmEvidence) -> tuple[float, float]:
    """Order arms by what an attempt costs: money when known, else tokens (unknown last)."""
    return (
        math.inf if evidence.mean_cost is None else evidence.mean_cost,
        math.inf if evidence.mean_tokens is None else evidence.mean_tokens,
    )


def choose(
    arms: Sequence[Arm],
    observations: Iterable[Observation],
    *,
    settings: LearnerSettings = DEFAULT_SETTINGS,
    rng: random.Random,
    full: Collection[str] = (),
) -> Choice | None:
    """Choose among `arms` (None: there are none). `full`: actors without capacity now."""
    if not arms:
        return None
    evidence = gather(arms, observations, settings.half_life)
    for e in evidence:
        e.has_capacity = e.arm.actor not in full
    pool = [e for e in evidence if e.has_capacity] or evidence
    order = {e.arm: i for i, e in enumerate(evidence)}

    def cheapest(tied: Iterable[ArmEvidence]) -> ArmEvidence:
        return min(tied, key=lambda e: (_cheapness(e), order[e.arm]))

    if settings.explore:
        unproven = [e for e in pool if e.attempts < settings.min_evidence]
        if unproven:
            fewest = min(e.attempts for e in unproven)
            least = cheapest(e for e in unproven if e.attempts == fewest)
            return Choice(least.arm, RULE_EVIDENCE, True, tuple(evidence))
        for e in evidence:  # every arm draws, so the reason shows what each scored
            e.score = rng.betavariate(1 + e.successes, 1 + e.failures)
        best = _best(pool, lambda e: e.score or 0.0, cheapest)
        top_mean = _best(pool, lambda e: e.mean, cheapest)
        return Choice(best.arm, RULE_SAMPLED, best.arm != top_mean.arm, tuple(evidence))
    for e in evidence:
        e.score = e.mean
    best = _best(pool, lambda e: e.mean, cheapest)
    return Choice(best.arm, RULE_BEST, False, tuple(evidence))


def _best(
    pool: Sequence[ArmEvidence],
    score: Callable[[ArmEvidence], float],
    cheapest: Callable[[Iterable[ArmEvidence]], ArmEvidence],
) -> ArmEvidence:
    """The arm of the highest score; arms within `TIE` of it count as tied (decay alone makes
    equal records differ a little), and the cheapest of those wins."""
    top = max(score(e) for e in pool)
    return cheapest(e for e in pool if score(e) >= top - TIE)


def seeded(*parts: object) -> random.Random:
    """A random source seeded by `parts` (run, step, attempt): the same parts, the same draws."""
    return random.Random(":".join(str(p) for p in parts))


MAX_STRATEGIES_SHOWN = 5
STRATEGIES_HEADING = "Strategies that worked before for requests like this one:"


def format_strategies(strategies: Iterable[str]) -> str:
    """Show learned strategies (suffix variants, or their text) to a model: a heading and one
    line each, at most MAX_STRATEGIES_SHOWN; "" when there are none."""
    lines: dict[str, None] = {}
    for strategy in strategies:
        text = strategy.removeprefix(SUFFIX_MARK).strip()
        if text:
            lines.setdefault(" ".join(text.split()))
        if len(lines) == MAX_STRATEGIES_SHOWN:
            break
    return "\n".join([STRATEGIES_HEADING, *(f"- {line}" for line in lines)]) if lines else ""
