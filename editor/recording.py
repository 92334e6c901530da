"""Turn a finished real run into a dry run's script: what its models, reviewers, tools and
searches answered, per alias, in the order the run asked them.

A dry run answers each actor alias from its script by the count of that alias's calls in the
run (DESIGN.md §4), so the script lists, per alias, the answer of every call the run made: a
step's answer, its validation judge's verdicts, its classifier's yes/no answers, its
tool-calling turns, the scores of the evaluators its branches asked; then the reviewers'
decisions, the tools' results (`tool.SERVER.TOOL`) and the hits of each search
(`sources.STEP`).

A run keeps each step's answer and what its judge, classifier and evaluators concluded (the
StepRun's details and the branch evaluations' reasons), not their raw text. The script gives
answers the engine reads the same way: a judge's four scores adding up to the recorded total,
with its feedback; a classifier's `{"selected": …}`; an evaluator's `Score: N`. The ModelCall
rows of a step say how many calls its evaluators and its tool loop made.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from runner.models import ModelCall, Run, StepRun
from runner.run_files import files_of_run
from runner.status import StepStatus
from workflows import engine
from workflows.engine.conditions.ai_evaluation import DEFAULT_EVALUATION_PROMPT
from workflows.engine.files import FILES, file_refs, is_file_type
from workflows.engine.self_check import DIMENSIONS, JUDGE_WEIGHT, RULE_WEIGHT

# What the script says to fail or time out a call (runner.providers.scripted).
FAIL = "@error"
TIMEOUT = "@timeout"
TOOL_CALLS = "@tool_calls:"
# An answer no judge, classifier or evaluator can read: the run recorded one like it.
UNREADABLE = "(no readable answer)"
SOURCES_PREFIX = "sources."
TOOL_PREFIX = "tool."
EVALUATION = ModelCall.Purpose.EVALUATION

_EVALUATOR_ANSWER = re.compile(
    r"judge scored (?P<score>-?\d+(?:\.\d+)?)"
    r"|judge '(?P<alias>[^']*)' failed: (?:\w+: )?(?P<error>[^;\]]*)"
    r"|(?P<unreadable>judge answer had no score)"
)
_CLASSIFIED = re.compile(
    r"(?P<verdict>selected|not selected)"
    r"(?: after (?P<retries>\d+) reclassification\(s\))?(?: \((?P<reason>.*)\))?",
    re.DOTALL,
)
_UNCLASSIFIED = re.compile(r"not selected, no readable answer in (?P<tries>\d+) tries: ")
# The tool loop answers these itself, without calling the tool (runner.steps.tool_loop).
_REFUSED_BY_THE_LOOP = ("the step offers no tool ", "the arguments are not a JSON object")


class RunNotRecordable(Exception):
    """The run cannot become a recipe test; the message says what stands in the way."""


@dataclass
class Recording:
    """A run as a recipe test: its inputs, the script of its answers, its path and status."""

    inputs: dict[str, Any]
    script: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, key: str, answer: Any) -> None:
        """Append the answer of one more call of `key` (an alias, `tool.X` or `sources.S`)."""
        self.script.setdefault(key, []).append(answer)


def _files_written_inline(run: Run, graph: engine.RecipeGraph) -> dict[str, Any]:
    """Return the run's inputs with each stored file written as a JSON client uploads one
    (`{"name", "content_base64", "media_type"}`), so that the test holds its files when the
    run is gone, and its dry run uploads them again (a ref to another run's file is refused)."""
    inputs = dict(run.inputs)
    stored = {str(row.id): row for rows in files_of_run(run.pk).values() for row in rows}
    total = sum(row.size for row in stored.values())
    if total > (most := int(settings.RECIPE_TEST_MAX_FILE_BYTES)):
        # Base64 makes them a third larger, in the test's inputs: past the bound, the test
        # could no longer be saved from its form (DATA_UPLOAD_MAX_MEMORY_SIZE).
        raise RunNotRecordable(
            f"run #{run.pk}: its files are {total:,} bytes together, more than the {most:,} a "
            "recipe test may hold (it keeps them in its inputs, in base64, to be edited): "
            "write a test with smaller files instead"
        )
    for name, spec in graph.inputs.items():
        if not is_file_type(spec.get("type")) or name not in inputs:
            continue
        written = []
        for ref in file_refs(inputs[name]):
            row = stored.get(str(ref.get("file")))
            if row is None:
                raise RunNotRecordable(
                    f"run #{run.pk}: the file {ref.get('name')!r} of input '{name}' is gone"
                )
            with row.blob.open("rb") as blob:
                data = blob.read()
            written.append(
                {
                    "name": row.name,
                    "content_base64": base64.b64encode(data).decode("ascii"),
                    "media_type": row.media_type,
                }
            )
        inputs[name] = written if spec.get("type") == FILES else written[0]
    return inputs


def record_run(run: Run, steps: Sequence[StepRun], graph: engine.RecipeGraph) -> Recording:
    """Return the script that makes a dry run of `run`'s version answer as `run` was answered.

    `steps` are the run's StepRuns in order with their evaluations and model calls (one per
    seq: the last attempt, the one the run went on from); `graph` the version it ran.
    Raise RunNotRecordable naming the step whose answers cannot be recovered.
    """
    recording = Recording(inputs=_files_written_inline(run, graph))
    # A run from before model calls were kept has no ModelCall rows at all.
    calls_kept = any(step.modelcall_set.all() for step in steps)
    for step_run in steps:
        where = f"step #{step_run.seq} ({step_run.step_key})"
        if not graph.has_step(step_run.step_key):
            raise RunNotRecordable(f"{where}: the run's version has no such step")
        spec = graph.step(step_run.step_key)
        calls = list(step_run.modelcall_set.all())
        # The step's own chat calls: its evaluators are asked after it, and its searches'
        # embeddings answer no script.
        own = [c for c in calls if c.purpose not in (EVALUATION, ModelCall.Purpose.EMBEDDING)]
        kind = step_run.kind
        if kind == "llm":
            _llm(recording, step_run, spec, own, calls_kept, where)
        elif kind == "classify":
            _classify(recording, step_run, spec, own, calls_kept, where)
        elif kind == "human":
            _human(recording, step_run, spec, where)
        elif kind == "tool":
            _tools(recording, step_run, spec)
        elif kind == "retrieve":
            _sources(recording, step_run, where)
        elif kind != "decision_tree":
            raise RunNotRecordable(f"{where}: a {kind!r} step cannot be scripted")
        _evaluators(recording, step_run, spec, calls, where)
    return recording


# -- step kinds ------------------------------------------------------------------------------


def _failure(step_run: StepRun) -> str:
    """Return the scripted answer that fails a call as the step's call failed."""
    if step_run.status == StepStatus.TIMED_OUT:
        return TIMEOUT
    return f"{FAIL}: {step_run.error or 'failed without a message'}"


def _failed_call(
    recording: Recording,
    alias: str,
    step_run: StepRun,
    own: list[ModelCall],
    calls_kept: bool,
    where: str,
    *,
    simple: bool,
) -> None:
    """Script a failed step's calls: none (it failed before asking), or its one failed call.

    `simple` says the step makes one call when it asks (no validation, tools or routes), which
    is all a run without ModelCall rows lets us tell.
    """
    made = len(own) if calls_kept else (1 if simple and step_run.prompt else 0)
    if made == 0:
        return
    if made == 1 and (not calls_kept or own[0].error):
        recording.add(alias, _failure(step_run))
        return
    raise RunNotRecordable(
        f"{where} failed after {made} model calls, and the run kept the answers of none of "
        "them: a script cannot replay it"
    )


def _llm(
    recording: Recording,
    step_run: StepRun,
    spec: engine.StepSpec,
    own: list[ModelCall],
    calls_kept: bool,
    where: str,
) -> None:
    alias = step_run.actor_alias or spec.actor or ""
    details = step_run.details if isinstance(step_run.details, dict) else {}
    if spec.sources:
        _sources(recording, step_run, where)
    if step_run.status in (StepStatus.FAILED, StepStatus.TIMED_OUT):
        simple = not spec.validation and not spec.tools
        _failed_call(recording, alias, step_run, own, calls_kept, where, simple=simple)
        _tools(recording, step_run, spec)
        return
    validation = details.get("validation")
    if spec.tools:
        if validation:
            raise RunNotRecordable(
                f"{where} answered through tools inside a validation loop; the run does not "
                "say which tool calls each attempt made"
            )
        turns = sum(1 for c in own if c.purpose == ModelCall.Purpose.TOOL_TURN) or None
        _tool_turns(recording, alias, step_run, spec, turns, where)
        recording.add(alias, step_run.response)
        _tools(recording, step_run, spec)
        return
    if not validation:
        recording.add(alias, step_run.response)
        return
    judge = (spec.validation or {}).get("judge") or spec.actor or ""
    for attempt in validation.get("attempts") or []:
        recording.add(alias, str(attempt.get("response", "")))
        recording.add(judge, judge_verdict(attempt))


def judge_verdict(attempt: dict[str, Any]) -> str:
    """Return a judge answer that scores a validation attempt as it was scored.

    The attempt keeps its judge's total (`judge_total`), given as four equal scores, and its
    feedback. One recorded before the total was kept has its rule score and confidence
    instead, reckoned with the weights of then (confidence = 0.3 * rule + 0.7 * total / 100),
    which give the total back. An attempt without feedback had an unreadable verdict.
    """
    feedback = attempt.get("feedback")
    if feedback is None:
        return UNREADABLE
    if isinstance(attempt.get("judge_total"), int | float):
        total = float(attempt["judge_total"])
    else:
        rule = float(attempt.get("rule_score") or 0)
        confidence = float(attempt.get("confidence") or 0)
        total = max(0.0, (confidence - RULE_WEIGHT * rule) / JUDGE_WEIGHT * 100)
    # Float noise would turn a total of 80 into 79.99999999999999 and miss a threshold.
    each = round(total / len(DIMENSIONS), 6)
    verdict: dict[str, Any] = {name: each for name in DIMENSIONS}
    verdict["feedback"] = str(feedback)
    return json.dumps(verdict, ensure_ascii=False)


def _tool_turns(
    recording: Recording,
    alias: str,
    step_run: StepRun,
    spec: engine.StepSpec,
    turns: int | None,
    where: str,
) -> None:
    """Script the tool loop's turns that asked for tools, before its final answer.

    The run keeps every tool call but not which turn asked for it: with the number of turns
    (its ModelCall rows), each turn but the last asks for one call and the last for the rest;
    without, each turn asks for one.
    """
    records = [r for r in step_run.details.get("tool_calls") or [] if isinstance(r, dict)]
    asking = (turns - 1) if turns is not None else len(records)
    if asking > len(records) or (asking == 0 and records):
        raise RunNotRecordable(
            f"{where}: its {turns} tool-calling turns do not match its {len(records)} tool calls"
        )
    groups = [records[i : i + 1] for i in range(max(asking - 1, 0))]
    if asking:
        groups.append(records[asking - 1 :])
    for group in groups:
        requested = [{"name": str(r.get("tool", "")), "arguments": _arguments(r)} for r in group]
        recording.add(alias, f"{TOOL_CALLS} {json.dumps(requested, ensure_ascii=False)}")


def _arguments(record: dict[str, Any]) -> dict[str, Any]:
    arguments = record.get("arguments")
    return arguments if isinstance(arguments, dict) else {}


def _tools(recording: Recording, step_run: StepRun, spec: engine.StepSpec) -> None:
    """Script the results of the tool calls the step made, per tool, in order."""
    offered = {spec.tool, *spec.tools} - {""}
    for record in step_run.details.get("tool_calls") or []:
        if not isinstance(record, dict):
            continue
        tool = str(record.get("tool", ""))
        error = str(record.get("error") or "")
        if tool not in offered or error.startswith(_REFUSED_BY_THE_LOOP):
            continue  # the loop refused the call itself: no tool was asked
        if error:
            answer = f"{FAIL}: {error}"
        elif record.get("is_error"):
            answer = f"{FAIL}: {record.get('result') or 'the tool reported an error'}"
        else:
            answer = str(record.get("result", ""))
        recording.add(f"{TOOL_PREFIX}{tool}", answer)


def _sources(recording: Recording, step_run: StepRun, where: str) -> None:
    """Script the hits the step's searches found in this execution."""
    retrieval = step_run.details.get("retrieval")
    if not isinstance(retrieval, dict):
        if step_run.status == StepStatus.SUCCEEDED:
            raise RunNotRecordable(f"{where}: the run did not keep what its searches found")
        return  # it failed before searching
    failed = [s for s in retrieval.get("searches") or [] if isinstance(s, dict) and s.get("error")]
    if failed:
        raise RunNotRecordable(
            f"{where}: its search of '{failed[0].get('knowledge_base')}' failed "
            f"({failed[0]['error']}), which a script cannot replay"
        )
    hits = [
        {
            "document": str(hit.get("document_title", hit.get("document", ""))),
            "text": str(hit.get("text", "")),
            "score": float(hit.get("score") or 0),
            "heading": str(hit.get("heading") or ""),
        }
        for hit in retrieval.get("hits") or []
        if isinstance(hit, dict)
    ]
    recording.add(f"{SOURCES_PREFIX}{step_run.step_key}", hits)


def _classify(
    recording: Recording,
    step_run: StepRun,
    spec: engine.StepSpec,
    own: list[ModelCall],
    calls_kept: bool,
    where: str,
) -> None:
    alias = spec.actor or ""
    if step_run.status in (StepStatus.FAILED, StepStatus.TIMED_OUT):
        _failed_call(recording, alias, step_run, own, calls_kept, where, simple=False)
        return
    if spec.bypass:
        return
    trace = [str(line) for line in step_run.details.get("trace") or []]
    asked = [route for route in spec.routes if not route.always_active]
    lines = [line for line in trace if not line.endswith(": always active")]
    if len(lines) != len(asked):
        raise RunNotRecordable(f"{where}: its trace does not list one verdict per route")
    for route, line in zip(asked, lines, strict=True):
        prefix = f"{route.name}: "
        verdict = line.removeprefix(prefix)
        unclassified = _UNCLASSIFIED.match(verdict)
        classified = _CLASSIFIED.fullmatch(verdict)
        if not line.startswith(prefix) or not (unclassified or classified):
            raise RunNotRecordable(f"{where}: cannot read its verdict on route '{route.name}'")
        if unclassified:
            for _ in range(int(unclassified["tries"])):
                recording.add(alias, UNREADABLE)
            continue
        assert classified is not None
        for _ in range(int(classified["retries"] or 0)):
            recording.add(alias, UNREADABLE)
        answer = {"selected": classified["verdict"] == "selected"}
        if classified["reason"]:
            answer["reason"] = classified["reason"]  # type: ignore[assignment]
        recording.add(alias, json.dumps(answer, ensure_ascii=False))


def _human(recording: Recording, step_run: StepRun, spec: engine.StepSpec, where: str) -> None:
    alias = step_run.actor_alias or spec.actor or ""
    if step_run.status == StepStatus.TIMED_OUT:
        recording.add(alias, TIMEOUT)
    elif step_run.status == StepStatus.DECIDED and step_run.decision:
        comment = step_run.response.strip()
        recording.add(alias, f"{step_run.decision}: {comment}" if comment else step_run.decision)
    else:
        raise RunNotRecordable(f"{where}: no reviewer decided it (it is {step_run.status})")


# -- evaluators ------------------------------------------------------------------------------


def _evaluators(
    recording: Recording,
    step_run: StepRun,
    spec: engine.StepSpec,
    calls: list[ModelCall],
    where: str,
) -> None:
    """Script the evaluators the step's branches asked (`ai_evaluation`), in call order.

    Each evaluation's reason says what its judge answered (`judge scored 7`, `judge 'x'
    failed: …`, `judge answer had no score`); a judge asked twice the same question is asked
    once, its score reused, so a reason may repeat an earlier one without a call. The step's
    ModelCall rows say which evaluator each call asked.
    """
    answers: list[str] = []
    for evaluation in step_run.evaluations.all():
        for found in _EVALUATOR_ANSWER.finditer(evaluation.reason):
            if found["score"] is not None:
                answers.append(f"Score: {found['score']}")
            elif found["unreadable"]:
                answers.append(UNREADABLE)
            else:
                answers.append(f"{FAIL}: {found['error'].strip() or 'the evaluator failed'}")
    if not answers:
        return
    asked = [c.actor_alias for c in calls if c.purpose == EVALUATION]
    if not asked:
        # The step's calls were not kept (a run from before they were, a copied step): with
        # one evaluator and question in its branches, that one was asked once.
        pairs = _evaluators_of(spec)
        if len(pairs) != 1:
            raise RunNotRecordable(
                f"{where}: the run did not keep which evaluator gave which score"
            )
        asked = pairs
    # Drop the reasons that repeat a cached score, the latest first, until one is left per call.
    while len(answers) > len(asked):
        repeat = next(
            (i for i in range(len(answers) - 1, 0, -1) if answers[i] in answers[:i]), None
        )
        if repeat is None:
            break
        del answers[repeat]
    if len(answers) != len(asked):
        raise RunNotRecordable(
            f"{where}: its {len(asked)} evaluator calls do not match the "
            f"{len(answers)} scores its branches report"
        )
    for alias, answer in zip(asked, answers, strict=True):
        recording.add(alias, answer)


def _evaluators_of(spec: engine.StepSpec) -> list[str]:
    """Return the distinct (evaluator, question) pairs of the step's branches, as aliases."""
    default = (spec.validation or {}).get("judge") or spec.actor or ""
    found: list[tuple[str, str]] = []

    def walk(condition: engine.Condition) -> None:
        if condition.type == "ai_evaluation":
            key = (
                str(condition.fields.get("evaluator") or default),
                str(condition.fields.get("prompt") or DEFAULT_EVALUATION_PROMPT),
            )
            if key not in found:
                found.append(key)
        for operand in condition.conditions:
            walk(operand)

    for branch in spec.active_branches:
        walk(branch.when)
    return [alias for alias, _ in found]
