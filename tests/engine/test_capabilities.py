"""Step `requires` against actor `capabilities`: parsed, checked at publish and at choice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tests.engine.builders import branch, recipe, step
from workflows.engine import (
    CAPABILITIES,
    Capabilities,
    Learning,
    RecipeInvalid,
    RunState,
    StepResult,
    capability_errors,
    decide,
    missing_capabilities,
    parse_capabilities,
    parse_recipe,
)

WRONG = {"type": "pattern_match", "operator": "contains", "value": "wrong"}
ACTORS = {"a": "model-a", "b": "model-b", "c": "model-c"}


def caps(*items: object) -> Capabilities:
    parsed, problems = parse_capabilities(list(items))
    assert problems == []
    return parsed


def test_it_reads_names_and_a_context_size() -> None:
    parsed = caps("vision", "tools", {"context": 8192})
    assert parsed == Capabilities(frozenset({"vision", "tools"}), 8192)
    assert parsed.as_json() == ["vision", "tools", {"context": 8192}]


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ("vision", "", "must be a list"),
        (["telepathy"], "[0]", "unknown capability 'telepathy'; expected one of: vision"),
        ([3], "[0]", "unknown capability 3"),
        (["vision", "vision"], "[1]", "vision is listed twice"),
        ([{"context": 0}], "[0].context", "must be a whole number of tokens"),
        ([{"context": "8k"}], "[0].context", "must be a whole number of tokens"),
        ([{"context": 8, "extra": 1}], "[0]", 'an object must be {"context": TOKENS}'),
        ([{"context": 8}, {"context": 9}], "[1]", "context is given twice"),
    ],
)
def test_it_refuses_a_bad_capability_list(value: object, path: str, message: str) -> None:
    _, problems = parse_capabilities(value)
    assert problems and problems[0][0] == path
    assert message in problems[0][1]


def test_the_engine_keeps_one_list_of_names() -> None:
    assert {"vision", "tools", "json", "json_schema"} <= set(CAPABILITIES)


def test_a_step_reads_its_requires() -> None:
    g = parse_recipe(recipe(step("s", requires=["vision", {"context": 8192}])))
    assert g.step("s").requires == Capabilities(frozenset({"vision"}), 8192)


def test_a_step_without_requires_needs_nothing() -> None:
    assert not parse_recipe(recipe(step("s"))).step("s").requires


@pytest.mark.parametrize(
    ("requires", "error"),
    [
        (["x-ray"], "steps[0].requires[0]: unknown capability 'x-ray'"),
        ({"vision": True}, "steps[0].requires: must be a list"),
    ],
)
def test_an_unknown_requirement_is_a_parse_error(requires: object, error: str) -> None:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(recipe(step("s", requires=requires)))
    assert any(e.startswith(error) for e in caught.value.errors), caught.value.errors


def test_a_step_without_a_model_actor_requires_nothing() -> None:
    doc = recipe(
        step("s", kind="human", actor="editors", prompt="Ok?", requires=["vision"]),
    )
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(doc)
    assert "steps[0].requires: a human step has no model actor" in caught.value.errors


@pytest.mark.parametrize(
    ("required", "offered", "lacking"),
    [
        (caps("vision"), None, []),  # not declared: not checked
        (caps("vision"), caps(), ["vision"]),
        (caps("vision", "tools"), caps("tools"), ["vision"]),
        (caps("json"), caps("json_schema"), []),  # a schema brings JSON with it
        (caps({"context": 8192}), caps({"context": 4096}), ["context >= 8192 (it has 4096)"]),
        (caps({"context": 8192}), caps({"context": 8192}), []),
        (caps({"context": 8192}), caps("vision"), []),  # no context declared: not checked
    ],
)
def test_it_tells_what_an_actor_lacks(
    required: Capabilities, offered: Capabilities | None, lacking: list[str]
) -> None:
    assert missing_capabilities(required, offered) == lacking


def test_publish_refuses_a_step_whose_actor_lacks_a_capability() -> None:
    g = parse_recipe(recipe(step("look", requires=["vision", "tools"])))
    errors = capability_errors(g, {"writer": caps("tools")})
    assert errors == ["steps[0] ('look').requires: actor 'writer' lacks vision"]


def test_publish_accepts_capable_and_undeclared_actors() -> None:
    g = parse_recipe(recipe(step("look", requires=["vision"])))
    assert capability_errors(g, {"writer": caps("vision", "tools")}) == []
    assert capability_errors(g, {"writer": None}) == []
    assert capability_errors(g, {}) == []


def test_publish_refuses_an_incapable_alternative_actor() -> None:
    retry = branch(
        "retry", 1, WRONG, "RETRY_WITH_DIFFERENT_ACTOR", None, params={"alternative_actor": "judge"}
    )
    g = parse_recipe(recipe(step("look", retry, requires=["vision"])))
    errors = capability_errors(g, {"writer": caps("vision"), "judge": caps()})
    assert errors == [
        "steps[0] ('look').branches[0].params.alternative_actor: actor 'judge' lacks vision"
    ]


def test_publish_refuses_an_incapable_actor_in_a_list_of_alternatives() -> None:
    alternatives = {"alternative_actor": ["writer", "judge"], "max_retries": 2}
    retry = branch("retry", 1, WRONG, "RETRY_WITH_DIFFERENT_ACTOR", None, params=alternatives)
    g = parse_recipe(recipe(step("look", retry, requires=["vision"])))
    errors = capability_errors(g, {"writer": caps("vision"), "judge": caps()})
    assert errors == [
        "steps[0] ('look').branches[0].params.alternative_actor[1]: actor 'judge' lacks vision"
    ]


def test_a_learned_step_needs_one_capable_candidate() -> None:
    doc = recipe(
        step("look", actor="@learned", candidates=["writer", "judge"], requires=["vision"])
    )
    g = parse_recipe(doc)
    assert capability_errors(g, {"writer": caps(), "judge": caps("vision")}) == []
    errors = capability_errors(g, {"writer": caps(), "judge": caps("tools")})
    assert errors == [
        "steps[0] ('look').requires: no candidate actor has it all: actor 'writer' lacks "
        "vision; actor 'judge' lacks vision"
    ]


def declared(offered: Mapping[str, Capabilities | None]) -> Any:
    def capabilities(aliases: Sequence[str]) -> Mapping[str, Capabilities | None]:
        return {a: offered.get(a) for a in aliases}

    return capabilities


def test_a_retry_skips_an_actor_that_lacks_a_capability_and_says_why() -> None:
    retry = branch("retry", 1, WRONG, "RETRY_WITH_DIFFERENT_ACTOR", None)
    doc = recipe(
        step("s", retry, branch("done", 2, target="next"), actor="a", requires=["vision"]),
        step("next", actor="a"),
        actors=ACTORS,
    )
    g = parse_recipe(doc)
    learning = Learning(capabilities=declared({"b": caps("tools"), "c": caps("vision")}))
    decision = decide(
        g, RunState.start(g, {"topic": "x"}), StepResult("s", "wrong"), learning=learning
    )
    assert decision.kind == "retry_actor"
    assert decision.actor == "c"
    assert decision.choice is not None
    assert decision.choice.skipped == (("b", "actor 'b' lacks vision"),)
    record = decision.choice.as_json()
    assert record["skipped"] == [{"actor": "b", "reason": "actor 'b' lacks vision"}]
    assert "skipped actor 'b' lacks vision" in record["reason"]


def test_a_retry_with_no_capable_actor_left_is_exhausted() -> None:
    retry = branch("retry", 1, WRONG, "RETRY_WITH_DIFFERENT_ACTOR", None)
    doc = recipe(
        step("s", retry, branch("done", 2, target="next"), actor="a", requires=["vision"]),
        step("next", actor="a"),
        actors=ACTORS,
    )
    g = parse_recipe(doc)
    learning = Learning(capabilities=declared({"b": caps(), "c": caps("tools")}))
    decision = decide(
        g, RunState.start(g, {"topic": "x"}), StepResult("s", "wrong"), learning=learning
    )
    assert decision.kind != "retry_actor"
