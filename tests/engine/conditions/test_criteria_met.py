"""`criteria_met`: a judge checks a later answer against an intent step's success criteria."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.engine.builders import branch, graph, recipe, step
from tests.engine.conditions.cases import uncovered
from workflows.engine import (
    Condition,
    EvalContext,
    RecipeInvalid,
    RunState,
    StepResult,
    condition_summary,
    decide,
    evaluate_condition,
    lint_recipe,
    parse_recipe,
)
from workflows.engine.conditions.criteria_met import CONDITION_TYPE
from workflows.engine.intent import Intent

INTENT = Intent(
    "Explain recursion",
    "a short explanation",
    ("defines recursion", "gives an example", "is short"),
)


def met(n: int, yes: bool, why: str = "") -> dict[str, Any]:
    return {"n": n, "met": yes, "why": why}


def verdicts(*items: dict[str, Any], score: int | None = None) -> str:
    head = f"Score: {score}\n" if score is not None else ""
    return head + json.dumps({"criteria": list(items)})


ALL_MET = verdicts(met(1, True, "it does"), met(2, True, "factorial"), met(3, True), score=3)
TWO_MET = verdicts(met(1, True, "it does"), met(2, True, "factorial"), met(3, False, "too long"))


def when(op: str = "all", value: object = None, **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": "criteria_met", "operator": op, "intent_step": "understand"}
    if value is not None:
        doc["value"] = value
    doc.update(fields)
    return doc


def intent_step(*branches: dict[str, Any]) -> dict[str, Any]:
    return step("understand", *branches, kind="intent", prompt="{topic}")


def parsed(condition_doc: dict[str, Any]) -> Condition:
    """Parse `condition_doc` as the condition of the step after an intent step."""
    recipe_graph = graph(intent_step(), step("answer", branch("b", 1, condition_doc)))
    return recipe_graph.step("answer").branches[0].when


class Judge:
    """A judge that answers in turn (the last answer repeats), noting what it was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = answers
        self.asked: list[tuple[str, str, str]] = []

    def __call__(self, evaluator: str, instruction: str, text: str) -> str:
        self.asked.append((evaluator, instruction, text))
        return self.answers[min(len(self.asked), len(self.answers)) - 1]


def evaluated(
    condition_doc: dict[str, Any], judge: Judge, intent_answer: str | None = INTENT.response()
) -> tuple[bool, str]:
    answers = {"understand": intent_answer} if intent_answer is not None else {}
    ctx = EvalContext(
        text="Recursion is…", judge=judge, default_evaluator="writer", answer_of=answers.get
    )
    return evaluate_condition(parsed(condition_doc), ctx)


CASES: list[tuple[dict[str, Any], str, bool, str]] = [
    (
        when("all"),
        ALL_MET,
        True,
        "3/3 criteria met (needs all): 1. 'defines recursion' met (it does); "
        "2. 'gives an example' met (factorial); 3. 'is short' met",
    ),
    (
        when("all"),
        TWO_MET,
        False,
        "2/3 criteria met (needs all): 1. 'defines recursion' met (it does); "
        "2. 'gives an example' met (factorial); 3. 'is short' not met (too long)",
    ),
    (
        when("at_least", 0.6),
        TWO_MET,
        True,
        "2/3 criteria met (needs at least 0.6 of them): 1. 'defines recursion' met (it does); "
        "2. 'gives an example' met (factorial); 3. 'is short' not met (too long)",
    ),
    (
        when("at_least", 0.7),
        TWO_MET,
        False,
        "2/3 criteria met (needs at least 0.7 of them): 1. 'defines recursion' met (it does); "
        "2. 'gives an example' met (factorial); 3. 'is short' not met (too long)",
    ),
]


@pytest.mark.parametrize(("condition_doc", "answer", "matched", "reason"), CASES)
def test_it_counts_the_criteria_the_judge_finds_met(
    condition_doc: dict[str, Any], answer: str, matched: bool, reason: str
) -> None:
    judge = Judge(answer)
    assert evaluated(condition_doc, judge) == (matched, reason)
    [(evaluator, instruction, text)] = judge.asked
    assert (evaluator, text) == ("writer", "Recursion is…")
    assert '1. "defines recursion"\n2. "gives an example"\n3. "is short"' in instruction


def test_every_operator_has_a_true_and_a_false_case() -> None:
    cases = [(doc, "", {}, matched, "") for doc, _, matched, _ in CASES]
    assert uncovered(CONDITION_TYPE, cases) == []


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (
            "They all look fine.",
            "judge 'writer' answer unreadable, criteria not met: the judge gave no JSON "
            "\"criteria\" list: 'They all look fine.'",
        ),
        (
            verdicts(met(1, True), met(3, False)),
            "judge 'writer' answer unreadable, criteria not met: the judge gave no readable "
            "verdict for criterion 2",
        ),
        (
            verdicts({"met": "maybe"}, {"met": "yes"}),
            "judge 'writer' answer unreadable, criteria not met: the judge gave no readable "
            "verdict for criteria 1, 3",
        ),
    ],
)
def test_an_unreadable_judge_answer_is_not_met_with_the_reason(answer: str, reason: str) -> None:
    assert evaluated(when("all"), Judge(answer)) == (False, reason)


def test_it_reads_verdicts_in_order_with_yes_no_words_and_reasons() -> None:
    answer = (
        "```json\n"
        + json.dumps({"criteria": [{"met": "yes", "reason": "ok"}, {"met": "no"}, {"met": True}]})
        + "\n```"
    )
    assert evaluated(when("at_least", 0.5), Judge(answer)) == (
        True,
        "2/3 criteria met (needs at least 0.5 of them): 1. 'defines recursion' met (ok); "
        "2. 'gives an example' not met; 3. 'is short' met",
    )


def test_it_is_false_before_the_intent_step_answered() -> None:
    judge = Judge(ALL_MET)
    assert evaluated(when("all"), judge, intent_answer=None) == (
        False,
        "intent step 'understand' has not answered yet",
    )
    assert judge.asked == []


def test_it_is_false_when_the_intent_answer_holds_no_criteria() -> None:
    assert evaluated(when("all"), Judge(ALL_MET), intent_answer="no json") == (
        False,
        "intent step 'understand' left no criteria: the answer holds no JSON object: 'no json'",
    )


def test_it_is_false_with_the_reason_when_the_judge_fails() -> None:
    def judge(evaluator: str, instruction: str, text: str) -> str:
        raise RuntimeError("model down")

    ctx = EvalContext(
        text="x", judge=judge, default_evaluator="critic", answer_of=lambda k: INTENT.response()
    )
    assert evaluate_condition(parsed(when("all")), ctx) == (
        False,
        "judge 'critic' failed: RuntimeError: model down",
    )


def test_it_asks_the_named_evaluator() -> None:
    judge = Judge(ALL_MET)
    assert evaluated(when("all", evaluator="judge"), judge)[0] is True
    assert judge.asked[0][0] == "judge"


def test_without_a_reader_of_answers_it_says_the_intent_step_has_not_answered() -> None:
    ctx = EvalContext(text="x", judge=Judge(ALL_MET), default_evaluator="writer")
    assert evaluate_condition(parsed(when("all")), ctx) == (
        False,
        "intent step 'understand' has not answered yet",
    )


def run_graph() -> Any:
    return graph(
        intent_step(),
        step(
            "answer",
            branch("all_met", 1, when("all"), action="QUALITY_APPROVED", target="@complete"),
            branch("most_met", 2, when("at_least", 0.5), action="CONTINUE", target="@complete"),
            branch("retry", 3, action="REQUEST_MORE_DETAIL", target="@repeat"),
            prompt="Answer {topic} meeting {steps.understand.response}",
        ),
    )


def test_decide_reads_the_intent_answer_through_answer_of_and_asks_the_judge_once() -> None:
    recipe_graph = run_graph()
    state = RunState.start(recipe_graph, {"topic": "recursion"})
    stored: dict[int, str] = {}
    first = decide(recipe_graph, state, StepResult("understand", response=INTENT.response()))
    stored[state.step_count] = INTENT.response()
    assert first.next_step == "answer"

    judge = Judge(TWO_MET)

    def latest(key: str) -> str | None:
        seq = state.latest_seq.get(key)
        return None if seq is None else stored[seq]

    decision = decide(
        recipe_graph,
        state,
        StepResult("answer", response="An answer"),
        judge=judge,
        answer_of=latest,
    )
    assert len(judge.asked) == 1  # both criteria_met branches share one verdict per result
    assert [(e.branch, e.matched, e.taken) for e in decision.evaluations] == [
        ("all_met", False, False),
        ("most_met", True, True),
    ]
    assert "3. 'is short' not met (too long)" in decision.evaluations[1].reason


# -- parsing and lint --------------------------------------------------------------------------


def errors_of(*steps: dict[str, Any], **fields: Any) -> list[str]:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(recipe(*steps, **fields))
    return caught.value.errors


def answer_step(condition_doc: dict[str, Any]) -> dict[str, Any]:
    return step("answer", branch("b", 1, condition_doc))


@pytest.mark.parametrize(
    ("condition_doc", "error"),
    [
        (
            {"type": "criteria_met", "operator": "all"},
            "steps[1].branches[0].when.intent_step: is required: the key of the intent step "
            "whose criteria are checked",
        ),
        (
            when(intent_step="nowhere"),
            "steps[1].branches[0].when.intent_step: there is no step 'nowhere'; intent steps: "
            "understand",
        ),
        (
            when(intent_step="draft"),
            "steps[1].branches[0].when.intent_step: step 'draft' is not an intent step (its kind "
            "is llm)",
        ),
        (
            when(intent_step="later"),
            "steps[1].branches[0].when.intent_step: step 'later' is after this step; name an "
            "intent step that comes before it",
        ),
        (
            when(intent_step=3),
            "steps[1].branches[0].when.intent_step: must be a step key, got int",
        ),
        (
            when(evaluator="nobody"),
            "steps[1].branches[0].when.evaluator: unknown actor alias 'nobody'",
        ),
        (when("all", 1), "steps[1].branches[0].when.value: all takes no value"),
        (
            when("at_least", 0),
            "steps[1].branches[0].when.value: must be the share of criteria to meet, above 0 "
            "and at most 1 (0.5 is half), got 0",
        ),
        (when("at_least", 1.5), "steps[1].branches[0].when.value: must be the share"),
        (when("at_least"), "steps[1].branches[0].when.value: must be the share"),
        (
            when("most"),
            "steps[1].branches[0].when.operator: unknown operator 'most'; criteria_met takes: "
            "all, at_least",
        ),
    ],
)
def test_it_refuses_a_bad_criteria_met_with_its_path(
    condition_doc: dict[str, Any], error: str
) -> None:
    errors = errors_of(
        intent_step(),
        answer_step(condition_doc),
        step("draft"),
        step("later", kind="intent", prompt="{topic}"),
    )
    assert any(e.startswith(error) for e in errors), errors


def test_it_refuses_an_intent_step_checking_its_own_criteria() -> None:
    errors = errors_of(intent_step(branch("b", 1, when())))
    assert (
        "steps[0].branches[0].when.intent_step: step 'understand' is this step; name an intent "
        "step that comes before it" in errors
    )


def test_lint_names_the_actor_that_will_judge_when_no_evaluator_is_set() -> None:
    warnings = lint_recipe(run_graph())
    assert (
        "steps[1].branches[0].when.evaluator: not set; the step's judge or actor 'writer' will "
        "check the criteria" in warnings
    )


def test_its_summary_names_the_intent_step_and_the_share() -> None:
    assert condition_summary(when("all")) == "all criteria of understand"
    assert condition_summary(when("at_least", 0.8)) == "criteria of understand ≥ 0.8"


def progress_ctx(progress: dict[str, Any], judge: Judge) -> EvalContext:
    return EvalContext(
        text="Recursion is…",
        judge=judge,
        default_evaluator="writer",
        answer_of={"understand": INTENT.response()}.get,
        progress=progress,
    )


FIRST_MET = verdicts(met(1, True), met(2, False), met(3, False))
OTHERS_MET = verdicts(met(1, False), met(2, True), met(3, True))


def test_criteria_met_by_earlier_answers_count_through_the_progress_record() -> None:
    progress: dict[str, Any] = {}
    assert (
        evaluate_condition(parsed(when("all")), progress_ctx(progress, Judge(FIRST_MET)))[0]
        is False
    )
    assert progress == {
        "understand": {"criteria": list(INTENT.success_criteria), "met": [True, False, False]}
    }
    assert evaluate_condition(parsed(when("all")), progress_ctx(progress, Judge(OTHERS_MET))) == (
        True,
        "3/3 criteria met (needs all): 1. 'defines recursion' met earlier; "
        "2. 'gives an example' met; 3. 'is short' met",
    )
    assert progress["understand"]["met"] == [True, True, True]


def test_so_far_false_judges_the_answer_alone() -> None:
    progress = {"understand": {"criteria": list(INTENT.success_criteria), "met": [True] * 3}}
    condition = parsed(when("all", so_far=False))
    assert evaluate_condition(condition, progress_ctx(progress, Judge(OTHERS_MET)))[0] is False


def test_a_record_of_other_criteria_is_started_again() -> None:
    progress = {"understand": {"criteria": ["something else", "b", "c"], "met": [True] * 3}}
    assert (
        evaluate_condition(parsed(when("all")), progress_ctx(progress, Judge(OTHERS_MET)))[0]
        is False
    )
    assert progress["understand"]["met"] == [False, True, True]


def _loop(progress_answers: list[str]) -> tuple[RunState, list[str]]:
    """Run an intent step, then a `work` step looping back to itself through `more` until
    criteria_met holds; return the state and where each decision went."""
    doc = recipe(
        intent_step(),
        step(
            "work",
            branch("done", 1, when("all"), target="@complete"),
            branch("more", 2, {"type": "default"}, target="work", action="CONTINUE"),
        ),
    )
    recipe_graph = parse_recipe(doc)
    state = RunState.start(recipe_graph, {"topic": "recursion"})
    decide(recipe_graph, state, StepResult("understand", INTENT.response()))
    judge = Judge(*progress_answers)
    went = []
    for _ in progress_answers:
        decision = decide(
            recipe_graph,
            state,
            StepResult("work", "an answer"),
            judge=judge,
            answer_of={"understand": INTENT.response()}.get,
        )
        went.append(decision.kind)
        if decision.kind != "goto":
            break
    return state, went


def test_a_loop_stops_once_every_criterion_has_been_met_by_some_answer() -> None:
    state, went = _loop([FIRST_MET, OTHERS_MET])
    assert went == ["goto", "complete"]
    restored = RunState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored.progress["understand"]["met"] == [True, True, True]


def test_it_refuses_a_so_far_that_is_not_a_boolean() -> None:
    doc = recipe(intent_step(), step("answer", branch("b", 1, when("all", so_far="yes"))))
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(doc)
    assert "so_far: must be true or false, got 'yes'" in str(caught.value)
