"""An llm step's `images`: parsed against the recipe's file inputs, needing vision at publish."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, recipe, step
from workflows.engine import (
    Capabilities,
    Learning,
    RecipeInvalid,
    RunState,
    StepResult,
    capability_errors,
    decide,
    parse_recipe,
)
from workflows.engine.file_templates import parse_pages
from workflows.engine.images import ImageSpec

INPUTS = {
    "topic": {"type": "string"},
    "photo": {"type": "file", "accept": ["image/*"]},
    "scan": {"type": "file", "accept": ["application/pdf"]},
    "pile": {"type": "files"},
}
VISION = Capabilities(frozenset({"vision"}))
WRONG = {"type": "pattern_match", "operator": "contains", "value": "wrong"}


def with_images(images: object, **fields: Any) -> dict[str, Any]:
    return recipe(step("look", images=images, **fields), inputs=INPUTS)


def test_it_reads_input_names_and_page_ranges() -> None:
    images = ["photo", {"input": "scan", "pages": "2-4"}, {"input": "pile", "pages": "3"}]
    look = parse_recipe(with_images(images)).step("look")
    assert look.images == (
        ImageSpec("photo"),
        ImageSpec("scan", 2, 4),
        ImageSpec("pile", 3, 3),
    )
    assert [spec.as_json() for spec in look.images] == [
        "photo",
        {"input": "scan", "pages": "2-4"},
        {"input": "pile", "pages": "3"},
    ]


def test_a_step_without_images_has_none_and_needs_nothing() -> None:
    look = parse_recipe(recipe(step("look"), inputs=INPUTS)).step("look")
    assert look.images == ()
    assert not look.needs


def test_images_make_a_step_need_vision_beside_what_it_requires() -> None:
    look = parse_recipe(with_images(["photo"], requires=["tools", {"context": 8192}])).step("look")
    assert look.needs == Capabilities(frozenset({"vision", "tools"}), 8192)


@pytest.mark.parametrize(
    ("images", "path", "message"),
    [
        ("photo", "steps[0].images", "must be a list of file input names"),
        (
            ["topic"],
            "steps[0].images[0]",
            "'topic' is not a file input of the recipe; its file inputs: photo, pile, scan",
        ),
        (["nothing"], "steps[0].images[0]", "'nothing' is not a file input"),
        ([{"input": "nothing"}], "steps[0].images[0].input", "'nothing' is not a file input"),
        ([{"pages": "1"}], "steps[0].images[0].input", "is required"),
        ([{"input": "scan", "page": "1"}], "steps[0].images[0]", "unknown field 'page'"),
        ([{"input": "scan", "pages": "0"}], "steps[0].images[0].pages", "must be a page or"),
        ([{"input": "scan", "pages": "3-1"}], "steps[0].images[0].pages", "must be a page or"),
        ([{"input": "scan", "pages": 2}], "steps[0].images[0].pages", "must be a page or"),
        ([{"input": "scan", "pages": "1-"}], "steps[0].images[0].pages", "must be a page or"),
        ([{"input": "photo", "pages": "1"}], "steps[0].images[0].pages", "'photo' takes no PDF"),
        (["photo", "photo"], "steps[0].images[1]", "is listed twice"),
        ([3], "steps[0].images[0]", "must be a file input name or {input, pages}"),
        (["photo"] * 21, "steps[0].images", "a step lists at most 20 images"),
    ],
)
def test_it_refuses_bad_images(images: object, path: str, message: str) -> None:
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(with_images(images))
    assert any(e.startswith(f"{path}: ") and message in e for e in caught.value.errors), (
        caught.value.errors
    )


def test_only_an_llm_step_shows_images() -> None:
    doc = recipe(
        step("look", kind="transform", set={"n": "`1`"}, actor=None, images=["photo"]),
        inputs=INPUTS,
    )
    with pytest.raises(RecipeInvalid) as caught:
        parse_recipe(doc)
    assert "steps[0].images: a transform step has no images" in caught.value.errors


@pytest.mark.parametrize(
    ("value", "bounds"),
    [("1", (1, 1)), ("2-4", (2, 4)), ("7-7", (7, 7)), ("0", None), ("a", None), ("", None)],
)
def test_it_reads_a_page_range(value: str, bounds: tuple[int, int] | None) -> None:
    assert parse_pages(value) == bounds


def test_publish_refuses_images_for_an_actor_without_vision() -> None:
    graph = parse_recipe(with_images(["photo"]))
    errors = capability_errors(graph, {"writer": Capabilities(frozenset({"tools"}))})
    assert errors == ["steps[0] ('look').images: actor 'writer' lacks vision"]
    assert capability_errors(graph, {"writer": VISION}) == []


def test_a_step_requiring_vision_itself_is_reported_once() -> None:
    graph = parse_recipe(with_images(["photo"], requires=["vision"]))
    errors = capability_errors(graph, {"writer": Capabilities()})
    assert errors == ["steps[0] ('look').requires: actor 'writer' lacks vision"]


def test_a_learned_step_with_images_needs_a_candidate_that_sees() -> None:
    doc = with_images(["photo"], actor="@learned", candidates=["writer", "judge"])
    graph = parse_recipe(doc)
    assert capability_errors(graph, {"writer": Capabilities(), "judge": VISION}) == []
    errors = capability_errors(graph, {"writer": Capabilities(), "judge": Capabilities()})
    assert errors == [
        "steps[0] ('look').images: no candidate actor has it all: actor 'writer' lacks "
        "vision; actor 'judge' lacks vision"
    ]


@pytest.mark.parametrize("b_offers", [Capabilities(frozenset({"tools"})), None])
def test_a_retry_with_another_actor_skips_one_that_cannot_see_the_images(
    b_offers: Capabilities | None,
) -> None:
    # Not declared (None) is not taken to see: a model shown images it cannot see fails.
    retry = branch("retry", 1, WRONG, "RETRY_WITH_DIFFERENT_ACTOR", None)
    doc = recipe(
        step("s", retry, branch("done", 2, target="next"), actor="a", images=["photo"]),
        step("next", actor="a"),
        actors={"a": "model-a", "b": "model-b", "c": "model-c"},
        inputs=INPUTS,
    )
    graph = parse_recipe(doc)
    offered = {"b": b_offers, "c": VISION}
    learning = Learning(capabilities=lambda aliases: {a: offered.get(a) for a in aliases})

    decision = decide(graph, RunState.start(graph, {}), StepResult("s", "wrong"), learning=learning)

    assert (decision.kind, decision.actor) == ("retry_actor", "c")
    assert decision.choice is not None
    assert decision.choice.skipped == (("b", "actor 'b' lacks vision"),)


def test_publish_refuses_images_for_an_actor_that_declares_no_capabilities() -> None:
    # Not declared is taken to meet a step's `requires`, but a model shown images it cannot
    # see fails every run: images need vision declared.
    graph = parse_recipe(with_images(["photo"]))
    assert capability_errors(graph, {"writer": None}) == [
        "steps[0] ('look').images: actor 'writer' lacks vision"
    ]
    required = parse_recipe(with_images(["photo"], requires=["vision", "tools"]))
    assert capability_errors(required, {"writer": None}) == [
        "steps[0] ('look').requires: actor 'writer' lacks vision"
    ]
