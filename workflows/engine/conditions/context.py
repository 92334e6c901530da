"""What conditions read about one step result, with what several branches reuse cached."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from workflows.engine.budget import Spend
from workflows.engine.content_type import detect_content_type
from workflows.engine.output_schema import SchemaCheck
from workflows.engine.regex import MAX_TEXT_CHARS, bounded, encode
from workflows.engine.scoring import read_score, scale_of
from workflows.engine.self_check import ValidationSummary
from workflows.engine.sources import Citation
from workflows.engine.tools import ToolCalls

# A judge answers (evaluator alias, instruction, reviewed text) with the evaluator's raw reply.
# Implementations should send `scoring.evaluation_prompt(instruction, text)` to the model.
Judge = Callable[[str, str, str], str]

# answer_of(step key) -> the latest answer of that step in the run, or None before it answered.
AnswerOf = Callable[[str], str | None]


@dataclass(slots=True)
class EvalContext:
    """What conditions read about one step result; caches what several branches reuse.

    `scores` keeps each (evaluator, prompt) score so a judge is asked once per step result.
    Patterns read only the first `regex.MAX_TEXT_CHARS` characters of the text (`scanned`).
    `hits` are the step's own (None: it searched no sources); for a step that searched none,
    `found()` reads the run's latest hits, those of result `hits_seq`, through `hits_of`,
    once, and only when a condition asks. `tool_calls` are the step's recorded calls to tools
    (None: it could call none), indexed by tool only when a condition asks (`tools()`).
    `spend()` tells what the run has spent so far, this step's calls included (asked each
    time a `budget` condition is evaluated: an evaluator's call adds to it); None when the
    caller keeps no account. `budget_exceeded`: the budget refused one of the step's calls.
    `validation`: how the step's validation loop ended (None: it ran none).
    `classification_failure`: why a classify step's classifier gave no readable answer
    (None: it did, or the step classified nothing). `severity`: the severity of the step's
    failure (None: it did not fail; see `severity.py`). `schema`: how the step's answers met
    its output schema (None: none was checked).
    failure (None: it did not fail; see `severity.py`). `http_status`: the status an http
    step's response came with (None: no response, or not an http step).
    """

    text: str
    facts: Mapping[str, object] = field(default_factory=dict)
    decision: str | None = None
    timed_out: bool = False
    error: str | None = None
    route_selection: tuple[str, ...] | None = None
    judge: Judge | None = None
    default_evaluator: str | None = None
    scores: dict[tuple[str, str], tuple[float | None, str]] = field(default_factory=dict)
    hits: Sequence[Citation] | None = None
    hits_seq: int | None = None
    hits_of: Callable[[int], Sequence[Citation]] | None = None
    tool_calls: Sequence[Mapping[str, object]] | None = None
    spend: Callable[[], Spend] | None = None
    budget_exceeded: bool = False
    validation: ValidationSummary | None = None
    classification_failure: str | None = None
    severity: str | None = None
    schema: SchemaCheck | None = None
    http_status: int | None = None
    # Reads the latest answer of an earlier step (`step_answer`; criteria_met); None: none.
    answer_of: AnswerOf | None = None
    # What conditions other than judge scores ask a judge once per step result (the
    # verdicts of criteria_met), under a key of the condition's own.
    judged: dict[tuple[str, ...], object] = field(default_factory=dict)
    # The run's record of criteria met so far (`RunState.progress`), which criteria_met
    # reads and adds to; None: the caller keeps none (each answer is judged alone).
    progress: dict[str, dict[str, object]] | None = None
    _tools: ToolCalls | None = field(default=None, init=False, repr=False)
    _content_type: str | None = field(default=None, init=False, repr=False)
    _folded: str | None = field(default=None, init=False, repr=False)
    _words: int | None = field(default=None, init=False, repr=False)
    _encoded: bytes | None = field(default=None, init=False, repr=False)

    def failure(self) -> str | None:
        """Return why the step failed (its error, or that it timed out), or None."""
        if self.error is not None:
            return self.error
        return "timed out" if self.timed_out else None

    def content_type(self) -> str:
        """Return the detected content type of the text (computed once)."""
        if self._content_type is None:
            self._content_type = detect_content_type(self.text)
        return self._content_type

    def scanned(self) -> str:
        """Return the part of the text patterns read (all of it, up to MAX_TEXT_CHARS)."""
        return bounded(self.text)

    def scan_note(self) -> str:
        """Return what a reason adds when patterns read only part of the text, else ""."""
        if len(self.text) <= MAX_TEXT_CHARS:
            return ""
        return f" (in the first {MAX_TEXT_CHARS} of {len(self.text)} characters)"

    def folded(self) -> str:
        """Return the case-folded text (computed once) for case-insensitive substring checks."""
        if self._folded is None:
            self._folded = self.text.casefold()
        return self._folded

    def encoded(self) -> bytes:
        """Return the scanned text as UTF-8 bytes (computed once) for the regex conditions."""
        if self._encoded is None:
            self._encoded = encode(self.scanned())
        return self._encoded

    def word_count(self) -> int:
        """Return the number of whitespace-separated words of the text (computed once)."""
        if self._words is None:
            self._words = len(self.text.split())
        return self._words

    def found(self) -> Sequence[Citation] | None:
        """Return the hits the step worked with: its own, else the run's latest; None if none."""
        if self.hits is None and self.hits_seq is not None and self.hits_of is not None:
            self.hits = tuple(self.hits_of(self.hits_seq))
            self.hits_seq = None
        return self.hits

    def tools(self) -> ToolCalls | None:
        """Return the step's tool calls, indexed on first use; None if it could call none."""
        if self._tools is None and self.tool_calls is not None:
            self._tools = ToolCalls(self.tool_calls)
        return self._tools

    def step_answer(self, step_key: str) -> str | None:
        """Return the latest answer of step `step_key` in the run (None: none yet, or no
        reader of answers was given)."""
        return None if self.answer_of is None else self.answer_of(step_key)

    def score(self, evaluator: str, prompt: str) -> tuple[float | None, str]:
        """Return the evaluator's score for the text, or None and why there is none."""
        key = (evaluator, prompt)
        cached = self.scores.get(key)
        if cached is None:
            cached = self._ask(evaluator, prompt)
            self.scores[key] = cached
        return cached

    def _ask(self, evaluator: str, prompt: str) -> tuple[float | None, str]:
        if self.judge is None:
            return None, f"no judge available to ask '{evaluator}'"
        try:
            answer = self.judge(evaluator, prompt, self.text)
        except Exception as exc:  # a failing judge is a reason, not a crash of the run
            return None, f"judge '{evaluator}' failed: {type(exc).__name__}: {exc}"
        # The scale the instruction asks for: a score off it is no score.
        return read_score(answer, scale_of(prompt))
