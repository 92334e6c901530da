"""The bands of branch priorities (design note 000): errors first, then quality gates, then flow,
defaults last. Priorities are any positive integers; the bands are a convention that lint notes
and the editor shows, never a rule that refuses a recipe."""

from __future__ import annotations

from dataclasses import dataclass

from workflows.engine.conditions import asks_about_failure
from workflows.engine.graph import BranchSpec, RecipeGraph, StepSpec


@dataclass(frozen=True, slots=True)
class Band:
    """A range of priorities meant for one kind of branch; `high` None: no upper bound."""

    name: str
    label: str
    low: int
    high: int | None

    def holds(self, priority: int) -> bool:
        """Tell whether `priority` is in the band."""
        return self.low <= priority and (self.high is None or priority <= self.high)

    @property
    def span(self) -> str:
        """Return the band's range as people read it: `1-10`, `900+`."""
        return f"{self.low}+" if self.high is None else f"{self.low}-{self.high}"


ERRORS = Band("errors", "Error handling", 1, 10)
QUALITY = Band("quality", "Quality gates", 11, 50)
FLOW = Band("flow", "Flow control", 51, 100)
DEFAULTS = Band("defaults", "Defaults", 900, None)
BANDS: tuple[Band, ...] = (ERRORS, QUALITY, FLOW, DEFAULTS)


def band_of(priority: int) -> Band | None:
    """Return the band `priority` is in, or None (101-899 is in none)."""
    return next((band for band in BANDS if band.holds(priority)), None)


def describe(priority: object) -> str:
    """Return the band of `priority` as the editor shows it, e.g. `Error handling (1-10)`."""
    if not isinstance(priority, int) or isinstance(priority, bool) or priority < 1:
        return ""
    band = band_of(priority)
    if band is None:
        return f"in no band (between {FLOW.span} and {DEFAULTS.span})"
    return f"{band.label} ({band.span})"


def legend() -> str:
    """Return every band, in order, as one line: `Error handling 1-10, …`."""
    return ", ".join(f"{band.label.lower()} {band.span}" for band in BANDS)


def band_notes(graph: RecipeGraph) -> list[str]:
    """Return notes, as `path: message`, on branches whose priority is off their band."""
    notes: list[str] = []
    for i, step in enumerate(graph.steps):
        for branch in step.branches:
            path = f"steps[{i}].branches[{_index(step, branch)}].priority"
            notes += [f"{path}: {message}" for message in _branch_notes(step, branch)]
    return notes


def _index(step: StepSpec, branch: BranchSpec) -> int:
    return branch.source_index if branch.source_index is not None else step.branches.index(branch)


def _branch_notes(step: StepSpec, branch: BranchSpec) -> list[str]:
    if branch.when.type == "default":
        if DEFAULTS.holds(branch.priority):
            return []
        return [
            f"the default branch '{branch.name}' has priority {branch.priority}; defaults "
            f"belong in {DEFAULTS.span} (bands: {legend()})"
        ]
    if not asks_about_failure(branch.when) or ERRORS.holds(branch.priority):
        return []
    gates = [
        other
        for other in step.branches
        if QUALITY.holds(other.priority)
        and other.priority < branch.priority
        and not asks_about_failure(other.when)
    ]
    if not gates:
        return []
    return [
        f"the error-handling branch '{branch.name}' (priority {branch.priority}) comes after "
        f"the quality gate '{gates[0].name}' (priority {gates[0].priority}); error handling "
        f"belongs in {ERRORS.span} (bands: {legend()})"
    ]
