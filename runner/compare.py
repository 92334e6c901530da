"""Line two runs up step by step and say what differs: the one place runs are compared.

Steps are paired by step key along each run's path, in order (the longest common ordering of
the two paths' keys), so runs of different versions, or of different recipes, compare as well
as two runs of one version: a step that ran in one run only is a pair with one side empty.

A pair *differs* when what the step did differs: its actor, status, prompt, answer, decision,
error, or a branch evaluation (matched, taken, reason). Latency, tokens and cost are measures,
not behaviour: they are given as deltas and never make a pair differ (two runs of one script
take a different number of milliseconds).

Reads only, through the selectors; the caller checks that the user may see both runs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from .models import BranchEvaluation, Run, StepRun
from .selectors import run_steps

# Each text is compared up to this many characters: a diff of two 5 MB answers would take
# minutes and fill a page. Whether the texts differ is still decided on the whole texts.
MAX_DIFF_CHARS = 20_000
# Word by word up to this many words in the part that changed, then line by line up to this many
# lines; beyond that, the changed part is shown as deleted then inserted whole. A diff's time
# grows with the product of its lengths: at these sizes a worst case takes some 50 ms.
MAX_DIFF_WORDS = 1_000
MAX_DIFF_LINES = 1_000
# What one comparison may diff in all (words or lines): two runs of a hundred steps with long,
# wholly different answers would otherwise take seconds. Past it, changed parts show whole.
MAX_COMPARISON_TOKENS = 100_000

# What makes a pair differ, in the order a page lists it. `step` says one run has no such step.
STEP_FIELDS = ("actor", "status", "prompt", "response", "decision", "error")
RUN_FIELDS = ("recipe", "version", "inputs", "script", "status", "outcome", "error")

Op = Literal["equal", "insert", "delete"]
_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


@dataclass(frozen=True)
class Segment:
    """A piece of a text diff: text in both (`equal`), only in B (`insert`), only in A (`delete`)."""

    op: Op
    text: str


@dataclass(frozen=True)
class TextDiff:
    """How text A became text B; `truncated` when the texts were longer than the diff looks."""

    changed: bool
    segments: tuple[Segment, ...]
    truncated: bool = False


@dataclass(frozen=True)
class EvaluationSide:
    """One run's evaluation of a branch after a step."""

    priority: int | None
    matched: bool
    taken: bool
    reason: str


@dataclass(frozen=True)
class EvaluationChange:
    """A branch whose evaluation differs; a side is None when that run did not evaluate it."""

    branch: str
    a: EvaluationSide | None
    b: EvaluationSide | None
    # "branch" (evaluated in one run only), or which of matched, taken, reason, priority differ.
    changes: tuple[str, ...]


@dataclass(frozen=True)
class StepDeltas:
    """B minus A; None where neither run has a figure (latency: where either lacks one)."""

    latency_ms: int | None
    tokens_in: int | None
    tokens_out: int | None
    cost: Decimal | None


@dataclass(frozen=True)
class StepPair:
    """One step of the lined-up paths: A's and B's execution of it (one of them may be None)."""

    index: int
    step_key: str
    a: StepRun | None
    b: StepRun | None
    changes: tuple[str, ...]
    prompt: TextDiff
    response: TextDiff
    evaluations: tuple[EvaluationChange, ...]
    deltas: StepDeltas

    @property
    def differs(self) -> bool:
        """Say whether the step did anything differently in the two runs."""
        return bool(self.changes)

    @property
    def only(self) -> Literal["a", "b"] | None:
        """Return which run alone has the step, or None when both have it."""
        if self.b is None:
            return "a"
        if self.a is None:
            return "b"
        return None

    @property
    def a_branch(self) -> str | None:
        """Return the branch A took after the step."""
        return taken_branch(self.a)

    @property
    def b_branch(self) -> str | None:
        """Return the branch B took after the step."""
        return taken_branch(self.b)

    @property
    def branch_changed(self) -> bool:
        """Say whether both runs ran the step and went on by different branches."""
        return self.only is None and self.a_branch != self.b_branch


@dataclass(frozen=True)
class RunDeltas:
    """B minus A over the whole runs; None where a figure is missing from either run."""

    steps: int
    latency_ms: int
    duration_ms: int | None
    tokens_in: int
    tokens_out: int
    model_calls: int
    cost: Decimal


@dataclass(frozen=True)
class RunComparison:
    """Two runs lined up step by step."""

    a: Run
    b: Run
    steps: tuple[StepPair, ...]
    run_changes: tuple[str, ...]
    deltas: RunDeltas

    @property
    def differing(self) -> tuple[StepPair, ...]:
        """Return the pairs whose step did something differently, in path order."""
        return tuple(pair for pair in self.steps if pair.differs)

    @property
    def first_difference(self) -> StepPair | None:
        """Return the first pair that differs, if any."""
        return next((pair for pair in self.steps if pair.differs), None)

    @property
    def first_branch_change(self) -> StepPair | None:
        """Return the first step both runs ran and left by different branches, if any."""
        return next((pair for pair in self.steps if pair.branch_changed), None)

    @property
    def identical(self) -> bool:
        """Say whether nothing differs: no step and nothing about the runs themselves."""
        return not self.run_changes and not self.differing


def compare_runs(a: Run, b: Run) -> RunComparison:
    """Line runs `a` and `b` up step by step and say what differs between them."""
    steps_a, steps_b = list(run_steps(a)), list(run_steps(b))
    budget = _Budget(MAX_COMPARISON_TOKENS)
    pairs = [
        _pair(index, step_a, step_b, budget)
        for index, (step_a, step_b) in enumerate(_line_up(steps_a, steps_b))
    ]
    return RunComparison(
        a=a,
        b=b,
        steps=tuple(pairs),
        run_changes=_run_changes(a, b),
        deltas=_run_deltas(a, b, steps_a, steps_b),
    )


def taken_branch(step: StepRun | None) -> str | None:
    """Return the branch taken after a step (None: none was, or no step)."""
    if step is None:
        return None
    return next((e.branch for e in _evaluations(step) if e.taken), None)


def text_diff(a: str, b: str, *, budget: _Budget | None = None) -> TextDiff:
    """Return the diff of text `a` to text `b`, word by word, bounded for huge texts.

    `budget` counts the words (or lines) diffed across calls; once it is spent, what changed is
    shown deleted then inserted whole.
    """
    if a == b:
        cut = a[:MAX_DIFF_CHARS]
        return TextDiff(
            changed=False,
            segments=(Segment("equal", cut),) if cut else (),
            truncated=len(a) > MAX_DIFF_CHARS,
        )
    truncated = len(a) > MAX_DIFF_CHARS or len(b) > MAX_DIFF_CHARS
    a, b = a[:MAX_DIFF_CHARS], b[:MAX_DIFF_CHARS]
    # The common start and end first: cheap, and most edits are small ones in long texts.
    start = _word_start(a, b, _common_prefix(a, b))
    end = _common_prefix(a[start:][::-1], b[start:][::-1])
    end = len(a) - _word_end(a, b, len(a) - end, len(b) - end)
    middle_a, middle_b = a[start : len(a) - end], b[start : len(b) - end]
    segments = [Segment("equal", a[:start])]
    segments += _diff_middle(middle_a, middle_b, budget or _Budget(MAX_COMPARISON_TOKENS))
    segments.append(Segment("equal", a[len(a) - end :]))
    return TextDiff(changed=True, segments=_merged(segments), truncated=truncated)


# --- lining up ---------------------------------------------------------------------------------


def _line_up(
    steps_a: Sequence[StepRun], steps_b: Sequence[StepRun]
) -> list[tuple[StepRun | None, StepRun | None]]:
    """Pair the steps of two paths by step key, in order; unpaired steps get an empty side.

    The common start is paired first, then the common end, then what is between by the longest
    matching blocks: a run that looped once more than the other pairs its first pass with the
    other's, which is where the two runs parted.
    """
    keys_a = [s.step_key for s in steps_a]
    keys_b = [s.step_key for s in steps_b]
    start = 0
    while start < min(len(keys_a), len(keys_b)) and keys_a[start] == keys_b[start]:
        start += 1
    end = 0
    while end < min(len(keys_a), len(keys_b)) - start and keys_a[-1 - end] == keys_b[-1 - end]:
        end += 1
    lined: list[tuple[StepRun | None, StepRun | None]] = list(
        zip(steps_a[:start], steps_b[:start], strict=True)
    )
    middle_a, middle_b = steps_a[start : len(steps_a) - end], steps_b[start : len(steps_b) - end]
    # No "junk" heuristics: a key that recurs in a loop is as much a step as any other.
    matcher = difflib.SequenceMatcher(
        None, keys_a[start : len(keys_a) - end], keys_b[start : len(keys_b) - end], autojunk=False
    )
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            lined += zip(middle_a[i1:i2], middle_b[j1:j2], strict=True)
        else:
            # Different keys (a replace block shares none): each step ran in one run only.
            lined += [(step, None) for step in middle_a[i1:i2]]
            lined += [(None, step) for step in middle_b[j1:j2]]
    lined += zip(steps_a[len(steps_a) - end :], steps_b[len(steps_b) - end :], strict=True)
    return lined


def _pair(index: int, a: StepRun | None, b: StepRun | None, budget: _Budget) -> StepPair:
    """Compare one step's executions in the two runs."""
    step_key = (a or b).step_key  # type: ignore[union-attr]
    prompt = text_diff(a.prompt if a else "", b.prompt if b else "", budget=budget)
    response = text_diff(a.response if a else "", b.response if b else "", budget=budget)
    evaluations = _evaluation_changes(a, b)
    if a is None or b is None:
        changes: tuple[str, ...] = ("step",)
    else:
        differ = {
            "actor": (a.actor_alias, a.actor_name) != (b.actor_alias, b.actor_name),
            "status": a.status != b.status,
            "prompt": prompt.changed,
            "response": response.changed,
            "decision": a.decision != b.decision,
            "error": a.error != b.error,
        }
        changes = tuple(name for name in STEP_FIELDS if differ[name])
        if evaluations:
            changes += ("evaluations",)
    return StepPair(
        index=index,
        step_key=step_key,
        a=a,
        b=b,
        changes=changes,
        prompt=prompt,
        response=response,
        evaluations=evaluations,
        deltas=_step_deltas(a, b),
    )


def _evaluations(step: StepRun) -> list[BranchEvaluation]:
    # `run_steps` prefetched them in order: `.all()` reads no more rows.
    return list(step.evaluations.all())


def _evaluation_changes(a: StepRun | None, b: StepRun | None) -> tuple[EvaluationChange, ...]:
    """Return the branches whose evaluation differs between the two executions of a step."""
    if a is None or b is None:
        return ()
    evaluations_a, evaluations_b = _evaluations(a), _evaluations(b)
    sides_a = {e.branch: _side(e) for e in reversed(evaluations_a)}
    sides_b = {e.branch: _side(e) for e in reversed(evaluations_b)}
    # A's order, then the branches only B evaluated, in B's order.
    names = [e.branch for e in evaluations_a]
    names += [e.branch for e in evaluations_b if e.branch not in sides_a]
    changed = []
    for name in dict.fromkeys(names):
        side_a, side_b = sides_a.get(name), sides_b.get(name)
        if side_a is None or side_b is None:
            changed.append(EvaluationChange(name, side_a, side_b, ("branch",)))
            continue
        fields = tuple(
            f
            for f in ("matched", "taken", "reason", "priority")
            if getattr(side_a, f) != getattr(side_b, f)
        )
        if fields:
            changed.append(EvaluationChange(name, side_a, side_b, fields))
    return tuple(changed)


def _side(evaluation: BranchEvaluation) -> EvaluationSide:
    return EvaluationSide(
        priority=evaluation.priority,
        matched=evaluation.matched,
        taken=evaluation.taken,
        reason=evaluation.reason,
    )


# --- deltas ------------------------------------------------------------------------------------


def _delta(a: int | Decimal | None, b: int | Decimal | None) -> int | Decimal | None:
    """Return b - a, a missing figure counting as none spent; None when both are missing."""
    if a is None and b is None:
        return None
    return (b or 0) - (a or 0)


def _step_deltas(a: StepRun | None, b: StepRun | None) -> StepDeltas:
    latency = None
    if a is not None and b is not None and a.latency_ms is not None and b.latency_ms is not None:
        latency = b.latency_ms - a.latency_ms
    tokens_in = _delta(a.tokens_in if a else None, b.tokens_in if b else None)
    tokens_out = _delta(a.tokens_out if a else None, b.tokens_out if b else None)
    cost = _delta(a.cost if a else None, b.cost if b else None)
    return StepDeltas(
        latency_ms=latency,
        tokens_in=int(tokens_in) if tokens_in is not None else None,
        tokens_out=int(tokens_out) if tokens_out is not None else None,
        cost=Decimal(cost) if cost is not None else None,
    )


def run_duration_ms(run: Run) -> int | None:
    """Return how long a run took from start to finish, in ms (None: it has not finished)."""
    if run.started_at is None or run.finished_at is None:
        return None
    return round((run.finished_at - run.started_at).total_seconds() * 1000)


def _run_deltas(a: Run, b: Run, steps_a: list[StepRun], steps_b: list[StepRun]) -> RunDeltas:
    duration_a, duration_b = run_duration_ms(a), run_duration_ms(b)
    return RunDeltas(
        steps=len(steps_b) - len(steps_a),
        latency_ms=sum(s.latency_ms or 0 for s in steps_b)
        - sum(s.latency_ms or 0 for s in steps_a),
        duration_ms=(
            duration_b - duration_a if duration_a is not None and duration_b is not None else None
        ),
        tokens_in=b.tokens_in - a.tokens_in,
        tokens_out=b.tokens_out - a.tokens_out,
        model_calls=b.model_calls - a.model_calls,
        cost=Decimal(b.cost) - Decimal(a.cost),
    )


def _run_changes(a: Run, b: Run) -> tuple[str, ...]:
    differ = {
        "recipe": a.recipe_id != b.recipe_id,
        "version": a.version_id != b.version_id,
        "inputs": a.inputs != b.inputs,
        "script": a.script != b.script,
        "status": a.status != b.status,
        "outcome": a.outcome != b.outcome,
        "error": a.error != b.error,
    }
    return tuple(name for name in RUN_FIELDS if differ[name])


# --- text diffs --------------------------------------------------------------------------------


def _common_prefix(a: str, b: str) -> int:
    """Return the length of the longest common start of `a` and `b`."""
    n = min(len(a), len(b))
    low, high = 0, n
    # Binary search on slices: string comparison runs in C, a loop per character would not.
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _word_start(a: str, b: str, start: int) -> int:
    """Move a cut back to the start of the word it falls in, so that a changed word shows whole."""
    while start > 0 and a[start - 1].isalnum() and (_alnum_at(a, start) or _alnum_at(b, start)):
        start -= 1
    return start


def _word_end(a: str, b: str, end_a: int, end_b: int) -> int:
    """Move the cut before a common end (at `end_a` in `a`, `end_b` in `b`) forward to the end of
    the word it falls in; return it in `a`."""
    while (
        end_a < len(a)
        and a[end_a].isalnum()
        and (_alnum_at(a, end_a - 1) or _alnum_at(b, end_b - 1))
    ):
        end_a += 1
        end_b += 1
    return end_a


def _alnum_at(text: str, index: int) -> bool:
    return 0 <= index < len(text) and text[index].isalnum()


@dataclass
class _Budget:
    """The words (or lines) a comparison may still diff."""

    remaining: int

    def spend(self, tokens: int) -> bool:
        """Take `tokens` from the budget if it holds them; say whether it did."""
        if tokens > self.remaining:
            return False
        self.remaining -= tokens
        return True


def _diff_middle(a: str, b: str, budget: _Budget) -> list[Segment]:
    """Diff the parts of two texts that differ: by words, by lines, or whole, by size."""
    if not a or not b:
        return [Segment("delete", a), Segment("insert", b)]
    words_a, words_b = _WORDS.findall(a), _WORDS.findall(b)
    if max(len(words_a), len(words_b)) <= MAX_DIFF_WORDS and budget.spend(
        len(words_a) + len(words_b)
    ):
        return _diff_tokens(words_a, words_b)
    lines_a, lines_b = a.splitlines(keepends=True), b.splitlines(keepends=True)
    if max(len(lines_a), len(lines_b)) <= MAX_DIFF_LINES and budget.spend(
        len(lines_a) + len(lines_b)
    ):
        return _diff_tokens(lines_a, lines_b)
    return [Segment("delete", a), Segment("insert", b)]


def _diff_tokens(a: list[str], b: list[str]) -> list[Segment]:
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    segments: list[Segment] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            segments.append(Segment("equal", "".join(a[i1:i2])))
            continue
        if op in ("delete", "replace"):
            segments.append(Segment("delete", "".join(a[i1:i2])))
        if op in ("insert", "replace"):
            segments.append(Segment("insert", "".join(b[j1:j2])))
    return segments


def _merged(segments: list[Segment]) -> tuple[Segment, ...]:
    """Drop empty segments and join neighbours of one kind."""
    merged: list[Segment] = []
    for segment in segments:
        if not segment.text:
            continue
        if merged and merged[-1].op == segment.op:
            merged[-1] = Segment(segment.op, merged[-1].text + segment.text)
        else:
            merged.append(segment)
    return tuple(merged)
