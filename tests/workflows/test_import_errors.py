"""Import refuses a bad recipe document with every error at its path, and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import recipe_document
from tests.workflows.recipe_mutations import (
    Mutation,
    added_step,
    assert_reported,
    branch,
    counts,
    leaf,
    pattern,
    rejection,
    tree_step,
    with_branches,
    with_doc,
    with_step,
    without,
)

pytestmark = pytest.mark.django_db

# (mutation of the minimal document, the error it must produce; a trailing '*' matches a prefix)
DOCUMENT_ERRORS: list[tuple[str, Mutation, str]] = [
    (
        "wrong format",
        with_doc(format="branchline.recipe/v2"),
        "format: must be 'branchline.recipe/v1'",
    ),
    ("missing format", without("format"), "format: Field required"),
    ("missing slug", without("slug"), "slug: Field required"),
    ("missing name", without("name"), "name: Field required"),
    ("missing steps", without("steps"), "steps: Field required"),
    ("no steps", with_doc(steps=[]), "steps: List should have at least 1 item*"),
    ("missing step key", without("steps", 0, "key"), "steps[0].key: Field required"),
    ("missing step name", without("steps", 0, "name"), "steps[0].name: Field required"),
    (
        "missing branch condition",
        with_branches({k: v for k, v in branch().items() if k != "when"}),
        "steps[0].branches[0].when: Field required",
    ),
    ("steps not a list", with_doc(steps="write"), "steps: Input should be a valid list"),
    (
        "actors not a mapping",
        with_doc(actors=["writer"]),
        "actors: Input should be a valid dictionary",
    ),
    ("name not text", with_doc(name=42), "name: Input should be a valid string"),
    (
        "timeout not a number",
        with_step(timeout_s="soon"),
        "steps[0].timeout_s: Input should be a valid integer*",
    ),
    (
        "negative timeout",
        with_step(timeout_s=-5),
        "steps[0].timeout_s: Input should be greater than or equal to 1",
    ),
    (
        "priority not a number",
        with_branches(branch(priority="first")),
        "steps[0].branches[0].priority: Input should be a valid integer*",
    ),
    (
        "priority zero",
        with_branches(branch(priority=0)),
        "steps[0].branches[0].priority: Input should be greater than or equal to 1",
    ),
    (
        "branch active not a flag",
        with_branches(branch(active="maybe")),
        "steps[0].branches[0].active: Input should be a valid boolean*",
    ),
    (
        "condition not an object",
        with_branches(branch(when="always")),
        "steps[0].branches[0].when: Input should be a valid dictionary*",
    ),
    ("unknown step field", with_step(colour="red"), "steps[0].colour: unknown field"),
    ("unknown top-level field", with_doc(author="me"), "author: unknown field"),
    (
        "unknown step kind",
        with_step(kind="poem"),
        "steps[0].kind: Input should be 'llm', 'human', 'decision_tree', 'classify', 'retrieve', "
        "'tool', 'intent', 'transform' or 'http'",
    ),
    (
        "input of unknown type",
        with_doc(inputs={"topic": {"type": "colour"}}),
        "inputs.topic.type: Input should be*",
    ),
    (
        "validation threshold above 1",
        with_step(validation={"threshold": 7}),
        "steps[0].validation.threshold: Input should be less than or equal to 1",
    ),
    (
        "unknown condition type",
        with_branches(branch(when={"type": "vibe_check", "operator": "equals", "value": 1})),
        "steps[0].branches[0].when.type: unknown condition type 'vibe_check'*",
    ),
    (
        "unknown operator",
        with_branches(branch(when={"type": "length_check", "operator": "lessthan", "value": 200})),
        "steps[0].branches[0].when.operator: unknown operator 'lessthan'*",
    ),
    (
        "operator of another condition type",
        with_branches(
            branch(when={"type": "pattern_match", "operator": "less_than", "value": "x"})
        ),
        "steps[0].branches[0].when.operator: unknown operator 'less_than'*",
    ),
    (
        "unknown operator inside and",
        with_branches(
            branch(
                when={
                    "type": "and",
                    "conditions": [
                        {"type": "default"},
                        {"type": "length_check", "operator": "lessthan", "value": 1},
                    ],
                }
            )
        ),
        "steps[0].branches[0].when.conditions[1].operator: unknown operator 'lessthan'*",
    ),
    (
        "unknown action",
        with_branches(branch(action="JUMP")),
        "steps[0].branches[0].action: unknown action 'JUMP'*",
    ),
    (
        "target naming no step",
        with_branches(branch(target="nowhere")),
        "steps[0].branches[0].target: unknown step 'nowhere'; expected a step key or @repeat, @end, @complete",
    ),
    (
        "unknown special target",
        with_branches(branch(target="@later")),
        "steps[0].branches[0].target: unknown step '@later'*",
    ),
    (
        "unknown actor",
        with_doc(actors={"writer": "nobody"}),
        "actors.writer: unknown actor 'nobody'",
    ),
    (
        "unknown reviewer group",
        with_doc(actors={"writer": "scripted-writer", "editors": "@human:ghosts"}),
        "actors.editors: unknown reviewer group 'ghosts'",
    ),
    (
        "step actor that is no alias",
        with_step(actor="ghost"),
        "steps[0].actor: unknown actor alias 'ghost'; declared: writer",
    ),
    (
        "regex that does not compile",
        with_branches(branch(when=pattern("(unclosed"))),
        "steps[0].branches[0].when.value: invalid regex: missing ): (unclosed",
    ),
    (
        "backreference regex",
        with_branches(branch(when=pattern(r"(a)\1"))),
        "steps[0].branches[0].when.value: invalid regex: backreferences and lookaround are not supported*",
    ),
    (
        "lookahead regex",
        with_branches(branch(when=pattern("error(?=!)"))),
        "steps[0].branches[0].when.value: invalid regex: backreferences and lookaround are not supported*",
    ),
    (
        "unknown regex flag",
        with_branches(branch(when=pattern("error", flags="x"))),
        "steps[0].branches[0].when.flags: unknown regex flag 'x'; use i, m or s",
    ),
    (
        "unknown template name",
        with_step(prompt="Write about {nope}"),
        "steps[0].prompt: unknown template name 'nope'; declared inputs: topic",
    ),
    (
        "step number past the last step",
        with_step(prompt="Improve {step9_response}"),
        "steps[0].prompt: unknown template name 'step9_response'*",
    ),
    (
        "reference to a missing step",
        with_step(prompt="Improve {steps.missing.response}"),
        "steps[0].prompt: unknown template name 'steps.missing.response'*",
    ),
    (
        "attribute access in a template",
        with_step(prompt="{topic.__class__}"),
        "steps[0].prompt: attribute access in {topic.__class__} is not allowed",
    ),
    (
        "lone brace in a template",
        with_step(prompt="Write {topic"),
        "steps[0].prompt: single '{' in template*",
    ),
    (
        "decision tree that is not an object",
        tree_step("yes"),
        "steps[1].tree: Input should be a valid dictionary",
    ),
    (
        "decision tree without its tree",
        tree_step({"version": "1"}),
        "steps[1].tree.tree: is required",
    ),
    (
        "decision tree node without branches",
        tree_step(
            {
                "version": "1",
                "tree": {
                    "type": "node",
                    "priority": 1,
                    "condition": {"type": "check_safety", "has_unsafe_pages": True},
                },
            }
        ),
        "steps[1].tree.tree.if_true: is required",
    ),
    (
        "decision tree node of unknown type",
        tree_step({"version": "1", "tree": {"type": "bush"}}),
        "steps[1].tree.tree.type: unknown node type 'bush'*",
    ),
    (
        "decision tree condition of unknown type",
        tree_step(
            {
                "version": "1",
                "tree": {
                    "type": "node",
                    "priority": 1,
                    "condition": {"type": "check_horoscope"},
                    "if_true": leaf("write"),
                    "if_false": leaf("write"),
                },
            }
        ),
        "steps[1].tree.tree.condition.type: unknown condition type 'check_horoscope'*",
    ),
    (
        "decision tree leaf mapped to no step",
        tree_step(
            {
                "version": "1",
                "tree": {
                    "type": "node",
                    "priority": 1,
                    "condition": {"type": "check_safety", "has_unsafe_pages": True},
                    "if_true": leaf("unsafe"),
                    "if_false": leaf("write"),
                },
            },
            leaf_targets={"unsafe": "nowhere"},
        ),
        "steps[1].leaf_targets.unsafe: unknown step 'nowhere'*",
    ),
    (
        "decision tree leaf target for no leaf",
        tree_step(
            {"version": "1", "tree": leaf("write")},
            leaf_targets={"missing": "write"},
        ),
        "steps[1].leaf_targets.missing: no leaf 'missing' in the tree*",
    ),
    (
        "duplicate step keys",
        added_step(key="write", actor="writer"),
        "steps[1].key: duplicate step key 'write' (also steps[0])",
    ),
    ("step key that is not a slug", with_step(key="Write It!"), "steps[0].key: must match*"),
    (
        "slug that is not a slug",
        with_doc(slug="Short Story!"),
        "slug: must match ^[a-z0-9][a-z0-9_-]*$, got 'Short Story!'",
    ),
    (
        "human step run by a model",
        with_step(kind="human"),
        "steps[0].actor: a human step needs a reviewer group actor",
    ),
    (
        "human step escalating to a model",
        with_step(kind="human", escalate_to="writer"),
        "steps[0].escalate_to: 'writer' is not a reviewer group alias",
    ),
    (
        "a source with top_k zero",
        with_step(sources=[{"knowledge_base": "docs", "top_k": 0}]),
        "steps[0].sources[0].top_k: Input should be greater than or equal to 1",
    ),
    (
        "a source with an unknown field",
        with_step(sources=[{"knowledge_base": "docs", "url": "https://example.com"}]),
        "steps[0].sources[0].url: unknown field",
    ),
    (
        "a source with an unknown mode",
        with_step(sources=[{"knowledge_base": "docs", "mode": "vector"}]),
        "steps[0].sources[0].mode: Input should be 'fulltext', 'semantic' or 'hybrid'",
    ),
    (
        "a source naming no knowledge base",
        with_step(sources=[{"query": "{topic}"}]),
        "steps[0].sources[0].knowledge_base: Field required",
    ),
    (
        "a source that is no slug",
        with_step(sources=[{"knowledge_base": "Style Guide"}]),
        "steps[0].sources[0].knowledge_base: must be a knowledge base's slug*",
    ),
    (
        "a query naming an unknown input",
        with_step(sources=[{"knowledge_base": "docs", "query": "{subject}"}]),
        "steps[0].sources[0].query: unknown template name 'subject'*",
    ),
    (
        "a retrieve step without sources",
        with_step(kind="retrieve"),
        "steps[0].sources: is required: a list of at least one knowledge base to search",
    ),
    (
        "a human step with sources",
        with_step(kind="human", actor="editors", sources=[{"knowledge_base": "docs"}]),
        "steps[0].sources: a human step searches no sources",
    ),
    (
        "model step run by a reviewer group",
        with_doc(actors={"writer": "@human:editors"}),
        "steps[0].actor: 'writer' is a reviewer group, not a model",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [pytest.param(m, e, id=name) for name, m, e in DOCUMENT_ERRORS],
)
def test_it_refuses_a_bad_document_with_the_error_path(
    user: Any, actors: Any, mutate: Mutation, expected: str
) -> None:
    doc = recipe_document(slug="bad-recipe")
    mutate(doc)
    before = counts()

    errors = rejection(user, doc)

    assert_reported(errors, expected)
    assert counts() == before
