"""Line a replayed recipe test up with the path it expects: where the replay leaves the
recorded path, the branch that sent it elsewhere and that branch's reason.

A path is one step key per sequence number. When two paths part at position i, the step at
position i - 1 is where they fork: its branches now lead elsewhere. Its evaluations in the
replay (and in the recorded run, while that run is kept) say which branch each took and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from runner.models import Run, StepRun
from runner.selectors import run_steps

from .models import RecipeTest

SAME = "same"
DIFFERS = "differs"
ERROR = "error"


@dataclass(frozen=True)
class Turn:
    """What one step did next: the branch it took (blank: none) with its reason, and where
    the run went (a step key, or blank when the run stopped there)."""

    branch: str
    reason: str
    next: str


@dataclass(frozen=True)
class Fork:
    """Where a replay leaves the recorded path: the step whose branches now lead elsewhere.

    `seq` 0 means the runs differ from their first step (the draft starts elsewhere).
    """

    seq: int
    step: str
    recorded: Turn
    now: Turn


@dataclass
class ReplayResult:
    """One recipe test replayed: same path and status, another one, or no run at all."""

    test: RecipeTest
    verdict: str
    run: Run | None = None
    path: list[str] = field(default_factory=list)
    status: str = ""
    fork: Fork | None = None
    message: str = ""


@dataclass
class ReplayReport:
    """Every test of a recipe replayed against its draft (`version`: the draft snapshot)."""

    version_label: str = ""
    results: list[ReplayResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # why the draft cannot be replayed at all

    @property
    def differing(self) -> list[ReplayResult]:
        return [r for r in self.results if r.verdict == DIFFERS]

    @property
    def same(self) -> list[ReplayResult]:
        return [r for r in self.results if r.verdict == SAME]

    @property
    def failed(self) -> list[ReplayResult]:
        return [r for r in self.results if r.verdict == ERROR]


def last_attempts(steps: Sequence[StepRun]) -> list[StepRun]:
    """Return one StepRun per sequence number, its last attempt (the one the run went on
    from); `steps` are in (seq, attempt) order."""
    by_seq: dict[int, StepRun] = {}
    for step in steps:
        by_seq[step.seq] = step
    return [by_seq[seq] for seq in sorted(by_seq)]


def _turn(step: StepRun, next_key: str, run: Run | None) -> Turn:
    """Return what `step` did next: its taken branch and reason, and the next step."""
    taken = next((e for e in step.evaluations.all() if e.taken), None)
    if taken is not None:
        return Turn(taken.branch, taken.reason, next_key)
    if next_key:
        return Turn("", "no branch was taken: the run went on in sequence", next_key)
    if run is None:
        return Turn("", "the run stopped", "")
    return Turn("", f"the run {run.status}" + (f": {run.error}" if run.error else ""), "")


def first_fork(
    expected: Sequence[str],
    steps: Sequence[StepRun],
    run: Run,
    recorded_steps: Sequence[StepRun] | None = None,
    recorded_run: Run | None = None,
    expected_status: str = "",
) -> Fork | None:
    """Return where the replay (`run` and its `steps`, one per seq) leaves `expected`, or None
    when it takes the same path.

    `recorded_steps` are the steps of the run the test was recorded from, when it is kept:
    they give the recorded branch and its reason; without them, only where it went is known.
    """
    path = [s.step_key for s in steps]
    position = next(
        (i for i, (a, b) in enumerate(zip(expected, path, strict=False)) if a != b),
        min(len(expected), len(path)),
    )
    if position == len(expected) == len(path):
        return None
    if position == 0:
        recorded = Turn("", "the recorded run started here", expected[0] if expected else "")
        now = Turn("", "the draft starts here", path[0] if path else "")
        return Fork(seq=0, step="", recorded=recorded, now=now)
    step_key = path[position - 1]
    recorded_next = expected[position] if position < len(expected) else ""
    now_next = path[position] if position < len(path) else ""
    recorded_step = None
    if recorded_steps is not None and position - 1 < len(recorded_steps):
        candidate = recorded_steps[position - 1]
        if candidate.step_key == step_key:
            recorded_step = candidate
    if recorded_step is not None:
        recorded = _turn(recorded_step, recorded_next, recorded_run)
    elif recorded_next:
        recorded = Turn("", "", recorded_next)  # a test without its run: the reason is unknown
    else:
        recorded = Turn("", f"the run {expected_status or 'stopped'}", "")
    return Fork(
        seq=position,
        step=step_key,
        recorded=recorded,
        now=_turn(steps[position - 1], now_next, run),
    )


def replay_verdict(test: RecipeTest, run: Run, steps: Sequence[StepRun]) -> ReplayResult:
    """Compare a replay with the test's expected path and status."""
    recorded_steps: list[StepRun] | None = None
    recorded_run = test.source_run
    if recorded_run is not None:
        recorded_steps = last_attempts(list(run_steps(recorded_run)))
    fork = first_fork(
        test.expected_path,
        steps,
        run,
        recorded_steps,
        recorded_run,
        test.expected_status,
    )
    path = [s.step_key for s in steps]
    result = ReplayResult(test=test, verdict=SAME, run=run, path=path, status=run.status)
    if fork is not None:
        result.verdict = DIFFERS
        result.fork = fork
        result.message = describe_fork(fork)
    elif test.expected_status and run.status != test.expected_status:
        result.verdict = DIFFERS
        result.message = (
            f"same path, but the run {run.status} (recorded: {test.expected_status})"
            + (f": {run.error}" if run.error else "")
        )
    return result


def describe_fork(fork: Fork) -> str:
    """Return the fork in one line: where, which branch now and why, which one before."""
    if fork.seq == 0:
        return f"starts with {fork.now.next or 'no step'} instead of {fork.recorded.next}"

    def went(turn: Turn) -> str:
        branch = f"'{turn.branch}'" if turn.branch else "no branch"
        where = f"→ {turn.next}" if turn.next else "→ stop"
        return f"{branch} {where}" + (f" ({turn.reason})" if turn.reason else "")

    return f"at #{fork.seq} {fork.step}: now {went(fork.now)}; recorded {went(fork.recorded)}"
