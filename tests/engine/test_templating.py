from __future__ import annotations

import pytest

from workflows.engine import TemplateError, render, template_names
from workflows.engine.templating import TemplateContext

CONTEXT = {
    "topic": "dragons",
    "count": 3,
    "ok": True,
    "tags": ["a", "b"],
    "step1_response": "first",
    "steps.generate_story.response": "a story",
    "feedback": "",
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Write about {topic}", "Write about dragons"),
        ("{topic}{topic}", "dragonsdragons"),
        ("Revise: {step1_response}", "Revise: first"),
        ("Story: {steps.generate_story.response}", "Story: a story"),
        ("{count} items, ok={ok}, tags={tags}", '3 items, ok=true, tags=["a", "b"]'),
        ('Answer as {{"a": 1}}', 'Answer as {"a": 1}'),
        ("{{topic}} is literal", "{topic} is literal"),
        ("{{{topic}}}", "{dragons}"),
        ("No placeholders", "No placeholders"),
        ("", ""),
        ("Feedback: {feedback}.", "Feedback: ."),
    ],
)
def test_it_renders_by_plain_substitution(template: str, expected: str) -> None:
    assert render(template, CONTEXT) == expected


@pytest.mark.parametrize(
    ("template", "name", "message"),
    [
        ("{x.__class__}", "x.__class__", "attribute access in {x.__class__} is not allowed"),
        ("{topic.upper}", "topic.upper", "attribute access in {topic.upper} is not allowed"),
        ("{0}", "0", "positional placeholder {0} is not allowed; use a name"),
        ("{x[0]}", "x[0]", "indexing in {x[0]} is not allowed"),
        ("{x!r}", "x!r", "conversion in {x!r} is not allowed"),
        ("{x:>10}", "x:>10", "format spec in {x:>10} is not allowed"),
        ("{}", "", "empty placeholder {}; write {{ and }} for literal braces"),
        (
            "{ topic }",
            " topic ",
            "{ topic } is not a template name; write {{ and }} for literal braces",
        ),
        (
            'Reply {"a": 1}',
            '"a": 1',
            '{"a": 1} is not a template name; write {{ and }} for literal braces',
        ),
        (
            "{steps.x.prompt}",
            "steps.x.prompt",
            "attribute access in {steps.x.prompt} is not allowed",
        ),
        ("a } b", "}", "single '}' in template; write }} for a brace"),
        ("a { b", "{", "single '{' in template; write {{ for a brace"),
    ],
)
def test_it_refuses_placeholders_that_are_not_plain_names(
    template: str, name: str, message: str
) -> None:
    with pytest.raises(TemplateError) as raised:
        template_names(template)
    assert (raised.value.name, raised.value.message) == (name, message)
    with pytest.raises(TemplateError):
        render(template, CONTEXT)


def test_it_refuses_an_unknown_name_at_render() -> None:
    with pytest.raises(TemplateError) as raised:
        render("Hello {nobody}", CONTEXT)
    assert raised.value.name == "nobody"
    assert str(raised.value) == "unknown template name 'nobody'"


def test_it_lists_template_names_in_order_of_first_use() -> None:
    names = template_names("{b} {a} {b} {steps.k-1.response} {step2_response} {{c}}")
    assert names == ["b", "a", "steps.k-1.response", "step2_response"]


def test_it_does_not_reinterpret_substituted_values() -> None:
    assert render("{topic}", {"topic": "{feedback} {{x}}"}) == "{feedback} {{x}}"


def test_it_looks_up_a_step_s_answer_only_when_a_template_uses_it() -> None:
    asked: list[str] = []

    def answer(key: str) -> str:
        asked.append(key)
        return f"answer of {key}"

    inputs = {"topic": "dragons", "feedback": "an input", "step1_response": "an input"}
    context = TemplateContext(inputs, ["draft", "review"], answer, feedback="shorter")
    assert render("{topic}: {feedback}", context) == "dragons: shorter"
    assert asked == []
    assert render("{step1_response} | {steps.review.response}", context) == (
        "answer of draft | answer of review"
    )
    assert asked == ["draft", "review"]
    assert list(context) == [
        "topic",
        "feedback",
        "step1_response",
        "steps.draft.response",
        "steps.draft.sources",
        "step2_response",
        "steps.review.response",
        "steps.review.sources",
        "sources",
        "learned_strategies",
    ]


def test_learned_strategies_are_asked_for_only_when_named_and_empty_without_them() -> None:
    asked: list[str] = []

    def learned() -> str:
        asked.append("asked")
        return "Strategies: ask for data"

    context = TemplateContext({}, ["draft"], lambda key: "", learned=learned)
    assert render("{steps.draft.response}", context) == ""
    assert asked == []
    assert render("Tips: {learned_strategies}", context) == "Tips: Strategies: ask for data"
    assert render("{learned_strategies}", TemplateContext({}, ["draft"], lambda key: "")) == ""
    # An input of that name keeps its meaning.
    named = TemplateContext({"learned_strategies": "mine"}, ["draft"], str, learned=learned)
    assert render("{learned_strategies}", named) == "mine"
