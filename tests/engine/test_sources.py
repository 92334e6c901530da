"""Data sources in the engine: a step's searches, their hits as citations, `{sources}`, lint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.engine.builders import branch, graph, recipe, step
from workflows.engine import (
    Citation,
    RecipeInvalid,
    RunState,
    SourceSpec,
    StepResult,
    cited_numbers,
    decide,
    format_sources,
    lint_recipe,
    numbered,
    parse_recipe,
    read_script_hits,
    render,
)

DOCS = {"knowledge_base": "docs"}


def retrieve(key: str = "find", *branches: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """Return a retrieve step searching the `docs` base (fields override the defaults)."""
    doc = step(key, *branches, kind="retrieve", sources=[DOCS])
    del doc["actor"], doc["prompt"]
    doc.update(fields)
    return doc


def citation(number: int, score: float = 0.5, **fields: Any) -> Citation:
    values: dict[str, Any] = {"document": f"Doc {number}", "text": f"text {number}", **fields}
    return Citation(number=number, score=score, **values)


# -- reading a step's sources --------------------------------------------------------------


def test_it_reads_the_sources_of_a_retrieve_and_an_llm_step_with_defaults() -> None:
    g = graph(
        retrieve(),
        step(
            "answer",
            prompt="Answer {topic} from {steps.find.sources}",
            sources=[
                {
                    "knowledge_base": "faq",
                    "query": "{topic} {steps.find.response}",
                    "top_k": 3,
                    "min_score": 0.25,
                    "mode": "fulltext",
                }
            ],
        ),
    )

    find, answer = g.steps
    assert (find.kind, find.actor, find.sources) == ("retrieve", None, (SourceSpec("docs"),))
    assert find.sources[0].as_json() == {
        "knowledge_base": "docs",
        "query": "",
        "top_k": 5,
        "min_score": 0.0,
        "mode": "hybrid",
    }
    assert answer.sources == (
        SourceSpec("faq", "{topic} {steps.find.response}", 3, 0.25, "fulltext"),
    )


def test_a_step_without_sources_has_none() -> None:
    assert graph(step("answer")).steps[0].sources == ()
    assert graph(step("answer", sources=[])).steps[0].sources == ()


S = "steps[0].sources"
BAD_SOURCES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "no knowledge base",
        retrieve(sources=[{"query": "x"}]),
        [f"{S}[0].knowledge_base: is required: the slug of a knowledge base"],
    ),
    (
        "a knowledge base that is no slug",
        retrieve(sources=[{"knowledge_base": "My Docs"}]),
        [
            f"{S}[0].knowledge_base: must be a knowledge base's slug (^[a-z0-9][a-z0-9_-]*$, at "
            "most 100 characters), got 'My Docs'"
        ],
    ),
    (
        "a knowledge base that is no text",
        retrieve(sources=[{"knowledge_base": 7}]),
        [f"{S}[0].knowledge_base: must be a string, got int"],
    ),
    (
        "top_k zero",
        retrieve(sources=[{**DOCS, "top_k": 0}]),
        [f"{S}[0].top_k: must be a whole number from 1 to 50, got 0"],
    ),
    (
        "top_k too many",
        retrieve(sources=[{**DOCS, "top_k": 51}]),
        [f"{S}[0].top_k: must be a whole number from 1 to 50, got 51"],
    ),
    (
        "top_k as text",
        retrieve(sources=[{**DOCS, "top_k": "5"}]),
        [f"{S}[0].top_k: must be a whole number from 1 to 50, got '5'"],
    ),
    (
        "top_k true",
        retrieve(sources=[{**DOCS, "top_k": True}]),
        [f"{S}[0].top_k: must be a whole number from 1 to 50, got True"],
    ),
    (
        "min_score above 1",
        retrieve(sources=[{**DOCS, "min_score": 1.5}]),
        [f"{S}[0].min_score: must be a number from 0 to 1, got 1.5"],
    ),
    (
        "min_score below 0",
        retrieve(sources=[{**DOCS, "min_score": -0.1}]),
        [f"{S}[0].min_score: must be a number from 0 to 1, got -0.1"],
    ),
    (
        "an unknown mode",
        retrieve(sources=[{**DOCS, "mode": "vector"}]),
        [f"{S}[0].mode: unknown mode 'vector'; expected one of: fulltext, hybrid, semantic"],
    ),
    (
        "a query that is no text",
        retrieve(sources=[{**DOCS, "query": ["a"]}]),
        [f"{S}[0].query: must be a string, got list"],
    ),
    (
        "a query naming an unknown input",
        retrieve(sources=[{**DOCS, "query": "{subject}"}]),
        [f"{S}[0].query: unknown template name 'subject'; declared inputs: topic"],
    ),
    (
        "a query showing the step's own hits",
        retrieve(sources=[{**DOCS, "query": "more like {sources}"}]),
        [f"{S}[0].query: {{sources}} cannot be used here: the step has not searched yet"],
    ),
    (
        "a query with a refused placeholder",
        retrieve(sources=[{**DOCS, "query": "{topic.__class__}"}]),
        [f"{S}[0].query: attribute access in {{topic.__class__}} is not allowed"],
    ),
    (
        "a search that is no object",
        retrieve(sources=["docs"]),
        [f"{S}[0]: must be an object, got str"],
    ),
    (
        "sources that are no list",
        retrieve(sources=DOCS),
        [f"{S}: must be a list of searches, got dict"],
    ),
    (
        "too many sources",
        retrieve(sources=[DOCS] * 11),
        [f"{S}: a step searches at most 10 sources, got 11"],
    ),
    (
        "a retrieve step without sources",
        retrieve(sources=None),
        [f"{S}: is required: a list of at least one knowledge base to search"],
    ),
    (
        "a retrieve step with no search",
        retrieve(sources=[]),
        [f"{S}: is required: a list of at least one knowledge base to search"],
    ),
    (
        "a human step with sources",
        step("review", kind="human", actor="editors", sources=[DOCS]),
        ["steps[0].sources: a human step searches no sources"],
    ),
    (
        "a classify step with sources",
        step("triage", kind="classify", routes=[{"name": "a"}], sources=[DOCS]),
        ["steps[0].sources: a classify step searches no sources"],
    ),
]


@pytest.mark.parametrize(
    ("doc", "errors"), [pytest.param(d, e, id=name) for name, d, e in BAD_SOURCES]
)
def test_it_rejects_bad_sources_with_each_error_at_its_path(
    doc: dict[str, Any], errors: list[str]
) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(doc))
    assert raised.value.errors == errors


def test_a_retrieve_search_without_a_query_needs_an_input_to_search_for() -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(retrieve(sources=[DOCS, {**DOCS, "query": "lighthouses"}]), inputs={}))
    assert raised.value.errors == [
        "steps[0].sources[0].query: is required: the recipe has no input whose value it could "
        "search for"
    ]


# -- templates -----------------------------------------------------------------------------


def test_templates_may_show_the_hits_of_the_step_or_of_a_step_named() -> None:
    g = graph(
        retrieve(),
        step("answer", prompt="{sources} / {steps.find.sources}"),
        step(
            "review",
            kind="human",
            actor="editors",
            prompt="Check {steps.answer.response}",
            material="{steps.find.sources}",
        ),
    )
    assert [s.key for s in g.steps] == ["find", "answer", "review"]


@pytest.mark.parametrize(
    ("prompt", "error"),
    [
        (
            "{steps.search.sources}",
            "steps[0].prompt: unknown template name 'steps.search.sources'; there is no step "
            "'search'",
        ),
        (
            "{steps.answer.source}",
            "steps[0].prompt: attribute access in {steps.answer.source} is not allowed",
        ),
    ],
)
def test_it_refuses_hits_of_a_step_the_recipe_lacks(prompt: str, error: str) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(step("answer", prompt=prompt)))
    assert raised.value.errors == [error]


def test_an_input_called_sources_keeps_its_meaning() -> None:
    # Recipes written before steps searched may have an input of that name: they still work.
    document = recipe(
        retrieve("find", sources=[{**DOCS, "query": "{sources}"}]),
        step("answer", prompt="Answer from {sources}"),
        inputs={"sources": {"type": "string"}},
    )
    g = parse_recipe(document)
    state = RunState.start(g, {"sources": "my notes"})
    decide(g, state, StepResult("find", "…", hits=(citation(1),)))

    context = state.template_context("answer", lambda seq: "…", hits=lambda seq: (citation(1),))
    assert render(g.step("answer").prompt, context) == "Answer from my notes"
    assert context["steps.find.sources"] == "[1] Doc 1\ntext 1"
    assert lint_recipe(g) == []


# -- citations -----------------------------------------------------------------------------


def test_it_formats_hits_as_numbered_citations() -> None:
    hits = (
        Citation(1, "Install guide", " Run make setup.\n", 0.9, heading="Guide › Install"),
        Citation(2, "README", "Branchline runs recipes.", 0.4),
    )
    assert format_sources(hits) == (
        "[1] Install guide › Guide › Install\nRun make setup.\n\n[2] README\nBranchline runs recipes."
    )
    assert format_sources(()) == ""


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("Blue [2], because [1] says so [2].", (2, 1)),
        ("See [1, 3] and [ 4 ].", (1, 3)),
        ("No citation, [a] or [] or [12345].", ()),
        ("Twice [1][1]", (1,)),
        ("[10]", (10,)),
    ],
)
def test_it_finds_the_numbers_an_answer_cites(text: str, numbers: tuple[int, ...]) -> None:
    assert cited_numbers(text) == numbers


def test_it_numbers_stored_or_scripted_hits_and_cites_a_chunk_once() -> None:
    stored = {
        "chunk_id": 7,
        "document_id": 2,
        "document_title": "Guide",
        "knowledge_base": "docs",
        "heading": "Install",
        "text": "Run make setup.",
        "score": 0.8,
    }
    scripted = {"document": "FAQ", "text": "Yes.", "score": 0.5}

    hits = numbered([stored, scripted, {**stored, "score": 0.3}])

    assert hits == (
        Citation(1, "Guide", "Run make setup.", 0.8, "Install", "docs", 7, 2),
        Citation(2, "FAQ", "Yes.", 0.5),
    )
    assert hits[0].as_json() == {**stored, "number": 1}
    assert Citation.from_json(hits[1].as_json()) == hits[1]


def test_it_reads_a_scripts_hits_per_execution() -> None:
    value = [[{"document": "Guide", "text": "Run make.", "score": 1, "heading": "Install"}], []]
    assert read_script_hits(value, "script.sources.find") == (
        [[{"document": "Guide", "heading": "Install", "text": "Run make.", "score": 1.0}], []],
        [],
    )


P = "script.sources.find"


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ([], [f"{P}: must be a non-empty list, per execution, of lists of hits"]),
        ({"document": "x"}, [f"{P}: must be a non-empty list, per execution, of lists of hits"]),
        ([{"document": "x"}], [f"{P}[0]: must be a list of hits (an empty list: none found)"]),
        ([["Guide"]], [f"{P}[0][0]: must be an object with document, text and score"]),
        (
            [[{"document": "", "text": "t", "score": 0.5}]],
            [f"{P}[0][0].document: must be non-empty text"],
        ),
        (
            [[{"document": "d", "score": 0.5}]],
            [f"{P}[0][0].text: must be non-empty text"],
        ),
        (
            [[{"document": "d", "text": "t", "score": 2}]],
            [f"{P}[0][0].score: must be a number from 0 to 1, got 2"],
        ),
        (
            [[{"document": "d", "text": "t", "score": "high"}]],
            [f"{P}[0][0].score: must be a number from 0 to 1, got 'high'"],
        ),
        (
            [[{"document": "d", "text": "t", "score": 0.5, "heading": 3}]],
            [f"{P}[0][0].heading: must be text"],
        ),
        (
            [[{"document": "d", "text": "t", "score": 0.5, "url": "x"}]],
            [f"{P}[0][0]: unknown key 'url'; a hit has document, heading, score, text"],
        ),
        ([[]] * 101, [f"{P}: at most 100 executions, got 101"]),
    ],
)
def test_it_refuses_bad_script_hits_with_their_paths(value: object, errors: list[str]) -> None:
    assert read_script_hits(value, P)[1] == errors


# -- runs ----------------------------------------------------------------------------------


HAS_HITS = {"type": "retrieval", "operator": "greater_equal", "value": 1}
CITES = {"type": "cites_source", "operator": "cites"}


def answer_recipe() -> Any:
    return graph(
        retrieve(
            "find", branch("nothing", 1, {**HAS_HITS, "operator": "less_than"}, target="unknown")
        ),
        step(
            "answer",
            branch("cited", 1, CITES, target="@complete"),
            branch("uncited", 2, target="@end"),
            prompt="Answer {topic} from:\n{sources}",
        ),
        step("unknown", prompt="Say you do not know {topic}."),
    )


def test_a_step_with_hits_is_remembered_by_seq_only() -> None:
    g = answer_recipe()
    state = RunState.start(g, {"topic": "lamps"})

    decision = decide(g, state, StepResult("find", "[1] Doc 1\ntext 1", hits=(citation(1),)))

    assert (decision.kind, decision.next_step) == ("goto", "answer")
    assert [e.reason for e in decision.evaluations] == ["1 hit not < 1"]
    assert state.sources_seq == 1
    assert state.to_dict()["sources_seq"] == 1
    assert RunState.from_dict(state.to_dict()).sources_seq == 1
    assert "text 1" not in str(state.to_dict())


def test_no_hits_take_the_other_branch() -> None:
    g = answer_recipe()
    state = RunState.start(g, {"topic": "lamps"})

    decision = decide(g, state, StepResult("find", "", hits=()))

    assert (decision.kind, decision.next_step) == ("goto", "unknown")
    assert [e.reason for e in decision.evaluations] == ["0 hits < 1"]


def test_a_later_step_reads_the_runs_latest_hits_lazily() -> None:
    g = answer_recipe()
    state = RunState.start(g, {"topic": "lamps"})
    decide(g, state, StepResult("find", "…", hits=(citation(1), citation(2))))
    asked: list[int] = []

    def hits_of(seq: int) -> Sequence[Citation]:
        asked.append(seq)
        return (citation(1), citation(2))

    context = state.template_context("answer", lambda seq: "…", hits=hits_of)
    assert asked == []
    assert render(g.step("answer").prompt, context) == (
        "Answer lamps from:\n[1] Doc 1\ntext 1\n\n[2] Doc 2\ntext 2"
    )
    assert asked == [1]
    decision = decide(g, state, StepResult("answer", "Lamps glow [2]."), hits_of=hits_of)
    assert (decision.kind, decision.evaluations[0].reason) == ("complete", "cites [2]")
    assert asked == [1, 1]


def test_hits_are_not_read_when_no_condition_asks() -> None:
    g = graph(step("draft", branch("done", 1, target="@complete")))
    state = RunState.start(g, {"topic": "lamps"})
    state.sources_seq = 3

    def hits_of(seq: int) -> Sequence[Citation]:
        raise AssertionError("hits read")

    decision = decide(g, state, StepResult("draft", "…"), hits_of=hits_of)
    assert decision.kind == "complete"


def test_a_step_shows_its_own_hits_before_the_runs_and_a_named_steps_hits() -> None:
    g = answer_recipe()
    state = RunState.start(g, {"topic": "lamps"})
    decide(g, state, StepResult("find", "…", hits=(citation(1),)))
    stored = {1: (citation(1),)}

    own = state.template_context(
        "answer", lambda seq: "…", hits=stored.__getitem__, own_hits=(citation(1, document="x"),)
    )
    assert own["sources"] == "[1] x\ntext 1"
    assert own["steps.find.sources"] == "[1] Doc 1\ntext 1"
    assert own["steps.answer.sources"] == ""
    bare = state.template_context("answer", lambda seq: "…")
    assert bare["sources"] == "" and bare["steps.find.sources"] == ""


def test_before_any_search_sources_are_empty() -> None:
    g = answer_recipe()
    state = RunState.start(g, {"topic": "lamps"})
    context = state.template_context("answer", lambda seq: "…", hits=lambda seq: (citation(1),))
    assert context["sources"] == ""


# -- lint ----------------------------------------------------------------------------------


def test_it_warns_about_conditions_on_hits_of_a_step_that_has_none() -> None:
    g = graph(
        step("draft", branch("found", 1, HAS_HITS, target="answer")),
        step(
            "answer",
            branch("cited", 1, CITES, target="check"),
            prompt="Answer from {sources}",
        ),
        retrieve("check", branch("again", 1, CITES, target="@complete")),
    )
    assert lint_recipe(g) == [
        "steps[0].branches[0].when: the step searches no sources and its prompt shows none "
        "({sources}), so retrieval reads the hits the run found last, if any",
        "steps[2].branches[0].when: a retrieve step's response is its hits, numbered [1], [2]…: "
        "it always cites them; ask the step that answers from them",
    ]


def test_it_has_nothing_to_say_about_conditions_on_a_steps_own_hits() -> None:
    g = graph(
        retrieve("find", branch("none", 1, {**HAS_HITS, "operator": "less_than"}, target="@end")),
        step(
            "answer",
            branch("cited", 1, {"type": "not", "conditions": [CITES]}, target="@end"),
            sources=[DOCS],
        ),
    )
    assert lint_recipe(g) == []


def test_it_warns_about_templates_that_show_hits_no_step_finds() -> None:
    g = graph(
        step("draft", prompt="From {sources}"),
        step(
            "review",
            kind="human",
            actor="editors",
            prompt="Check {steps.draft.response}",
            material="{steps.draft.sources}",
            branches=[
                branch("any", 1, {"type": "human_decision", "value": "approve|reject|revise"})
            ],
        ),
    )
    assert lint_recipe(g) == [
        "steps[0].prompt: {sources} is always empty: no step of the recipe searches sources",
        "steps[1].material: {steps.draft.sources} is always empty: step 'draft' searches no "
        "sources",
    ]
