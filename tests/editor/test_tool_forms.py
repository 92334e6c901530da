"""The step panel's tools: an llm step's Tools section, a tool step's tool and arguments built
from the tool's input schema, and the run monitor's tool calls."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from editor.forms.tools import argument_specs
from runner.models import Run
from tools.models import ToolServer
from workflows.models import Recipe

from .conftest import draft, htmx_post, live_answer

ADD_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "number", "title": "A", "description": "The first number"},
        "b": {"type": "number", "title": "B"},
    },
    "required": ["a", "b"],
}
SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to find"},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 5},
        "mode": {"type": "string", "enum": ["fast", "deep"]},
        "filters": {"type": "object"},
        "exact": {"type": "boolean"},
    },
    "required": ["query"],
}


@pytest.fixture
def calc(db: None) -> ToolServer:
    return ToolServer.objects.create(
        name="calc",
        transport="stdio",
        command="demo",
        tools=[
            {"name": "add", "description": "Add <two> numbers.", "input_schema": ADD_SCHEMA},
            {"name": "search", "description": "Search things.", "input_schema": SEARCH_SCHEMA},
        ],
    )


@pytest.fixture
def hidden(db: None) -> ToolServer:
    return ToolServer.objects.create(
        name="off",
        transport="stdio",
        command="demo",
        enabled=False,
        tools=[{"name": "secret", "description": "", "input_schema": {"type": "object"}}],
    )


def step_fields(**overrides: Any) -> dict[str, Any]:
    """The step panel's fields for the story's first step, with its tools sections."""
    fields = {
        "apply": "1",
        "element": "s-1",
        "step": 0,
        "key": "write",
        "name": "Write",
        "kind": "llm",
        "actor": "writer",
        "sequence": "1",
        "prompt": "Write a story about {topic}",
        "sources-TOTAL_FORMS": "0",
        "sources-INITIAL_FORMS": "0",
        "tools-posted": "1",
        "tools-max_tool_calls": "5",
        "tools-max_tool_seconds": "60",
        "tool-tool": "",
    }
    fields.update(overrides)
    return fields


def tool_step_fields(tool: str, **arguments: str) -> dict[str, Any]:
    fields = step_fields(kind="tool", actor="", prompt="", **{"tool-tool": tool})
    fields.update({f"args-{name}": value for name, value in arguments.items()})
    return fields


def apply(web: Client, document: dict[str, Any], fields: dict[str, Any]) -> Any:
    return htmx_post(web, reverse("recipe-step-panel", args=["story"]), document, **fields)


def html(response: Any) -> str:
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


# -- the schema as fields ----------------------------------------------------------------------


def test_a_schema_becomes_one_field_per_property_required_first() -> None:
    specs = argument_specs(SEARCH_SCHEMA)

    assert [(s.name, s.type, s.required) for s in specs] == [
        ("query", "string", True),
        ("limit", "integer", False),
        ("mode", "string", False),
        ("filters", "object", False),
        ("exact", "boolean", False),
    ]
    assert specs[0].description == "What to find"
    assert specs[2].enum == ("fast", "deep")
    assert specs[1].default == 5


@pytest.mark.parametrize("schema", [None, "x", {}, {"type": "object"}, {"properties": []}])
def test_a_schema_without_properties_gives_no_fields(schema: Any) -> None:
    assert argument_specs(schema) == []


# -- an llm step's Tools section ---------------------------------------------------------------


def test_the_panel_lists_the_discovered_tools_with_their_schemas(
    story: Recipe, web: Client, calc: ToolServer, hidden: ToolServer
) -> None:
    page = html(htmx_post(web, reverse("recipe-step-panel", args=["story"]), draft(story), step=0))

    assert 'fieldset class="group tools" data-kind-only="llm"' in page
    assert 'value="calc.add"' in page and 'value="calc.search"' in page
    assert "Add &lt;two&gt; numbers." in page  # the tool's text is escaped
    assert "&quot;required&quot;: [" in page  # its input schema, in a <details>
    assert "off.secret" not in page  # a disabled server's tools are not offered
    assert 'data-kind-only="tool"' in page


def test_applying_an_llm_step_writes_its_tools(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    fields = step_fields(**{"tools-tools": ["calc.add", "calc.search"]})
    fields["tools-max_tool_calls"] = "3"

    answer = live_answer(apply(web, draft(story), fields))

    assert answer["errors"] == {} and answer["form_errors"] == []
    step = answer["result"]["step"]
    assert step["tools"] == ["calc.add", "calc.search"]
    assert step["max_tool_calls"] == 3
    assert "max_tool_seconds" not in step  # the default is not written


def test_unchecking_every_tool_drops_the_fields(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    document = draft(story)
    document["steps"][0].update(tools=["calc.add"], max_tool_calls=4)

    opened = html(apply(web, document, {"step": 0}))
    answer = live_answer(apply(web, document, step_fields()))

    assert 'value="calc.add" checked' in opened
    assert 'name="tools-max_tool_calls" value="4"' in opened
    step = answer["result"]["step"]
    assert "tools" not in step and "max_tool_calls" not in step


def test_a_post_without_the_tools_section_keeps_the_steps_tools(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    document = draft(story)
    document["steps"][0].update(tools=["calc.add"], max_tool_seconds=30)
    fields = step_fields()
    del fields["tools-posted"]

    answer = live_answer(apply(web, document, fields))

    step = answer["result"]["step"]
    assert step["tools"] == ["calc.add"] and step["max_tool_seconds"] == 30


def test_an_unknown_tool_is_refused_on_the_tools_field(
    story: Recipe, web: Client, calc: ToolServer, hidden: ToolServer
) -> None:
    document = draft(story)
    document["steps"][0]["tools"] = ["calc.gone"]

    opened = html(apply(web, document, {"step": 0}))
    answer = live_answer(
        apply(web, document, step_fields(**{"tools-tools": ["calc.gone", "off.secret"]}))
    )

    assert "calc.gone (not found)" not in opened  # listed by name, flagged
    assert "calc.gone" in opened and "not found" in opened
    assert answer["result"] is None
    errors = " ".join(answer["errors"]["tools-tools"])
    assert "Select a valid choice" in errors  # off.secret: not offered at all
    assert "A tool setting is not right: see Tools." in answer["form_errors"]


def test_an_unknown_tool_named_by_the_step_gets_a_clear_message(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    document = draft(story)
    document["steps"][0]["tools"] = ["calc.gone"]

    answer = live_answer(apply(web, document, step_fields(**{"tools-tools": ["calc.gone"]})))

    errors = " ".join(answer["errors"]["tools-tools"])
    assert "No tool calc.gone is known" in errors
    assert "A tool setting is not right: see Tools." in answer["form_errors"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tools-max_tool_calls", "51", "less than or equal to 50"),
        ("tools-max_tool_calls", "0", "greater than or equal to 1"),
        ("tools-max_tool_seconds", "x", "Enter a whole number"),
    ],
)
def test_bad_limits_are_refused_on_their_fields(
    story: Recipe, web: Client, calc: ToolServer, field: str, value: str, message: str
) -> None:
    answer = live_answer(
        apply(web, draft(story), step_fields(**{"tools-tools": ["calc.add"], field: value}))
    )

    assert message in " ".join(answer["errors"][field])
    assert answer["result"] is None


def test_too_many_tools_are_refused(story: Recipe, web: Client) -> None:
    ToolServer.objects.create(
        name="many",
        transport="stdio",
        command="demo",
        tools=[{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(21)],
    )

    answer = live_answer(
        apply(web, draft(story), step_fields(**{"tools-tools": [f"many.t{i}" for i in range(21)]}))
    )

    assert "at most 20 tools" in " ".join(answer["errors"]["tools-tools"])


# -- a tool step -------------------------------------------------------------------------------


def test_a_tool_step_gets_a_field_per_argument_and_writes_templates(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    answer = live_answer(
        apply(web, draft(story), tool_step_fields("calc.add", a="{topic}", b="3", ignored="x"))
    )

    assert answer["errors"] == {} and answer["form_errors"] == []
    step = answer["result"]["step"]
    assert step["kind"] == "tool"
    assert step["tool"] == "calc.add"
    assert step["arguments"] == {"a": "{topic}", "b": "3"}
    assert "actor" not in step and "tools" not in step


def test_the_panel_of_a_tool_step_shows_its_arguments(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    document = draft(story)
    document["steps"][0] = {
        "key": "write",
        "name": "Write",
        "kind": "tool",
        "tool": "calc.search",
        "arguments": {"query": "{topic}", "old": "1"},
        "branches": [],
    }

    page = html(apply(web, document, {"step": 0}))

    assert '<option value="calc.search" selected>' in page
    assert 'name="args-query"' in page and "{topic}</textarea>" in page
    assert "query (string, required)" in page
    assert "limit (integer)" in page
    assert "One of: fast, deep." in page
    assert "What to find" in page
    assert "dropped when applied: <code>old</code>" in page


def test_a_required_argument_left_empty_is_an_error_on_its_field(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    answer = live_answer(apply(web, draft(story), tool_step_fields("calc.add", a="1", b="")))

    assert answer["result"] is None
    assert answer["errors"]["args-b"] == ["The tool needs b: write a value."]
    assert "args-a" not in answer["errors"]
    assert "see Tool call" in " ".join(answer["form_errors"])


@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ({"query": "x", "limit": "many"}, "limit", "is not valid under any of the given"),
        ({"query": "x", "mode": "slow"}, "mode", "'slow' is not one of ['fast', 'deep']"),
        ({"query": "x", "filters": "[1]"}, "filters", "is not of type 'object'"),
        ({"query": "x", "exact": "maybe"}, "exact", "is not of type 'boolean'"),
    ],
)
def test_a_literal_argument_of_the_wrong_type_is_an_error_on_its_field(
    story: Recipe,
    web: Client,
    calc: ToolServer,
    arguments: dict[str, str],
    field: str,
    message: str,
) -> None:
    answer = live_answer(apply(web, draft(story), tool_step_fields("calc.search", **arguments)))

    assert message in " ".join(answer["errors"][f"args-{field}"])
    assert list(answer["errors"]) == [f"args-{field}"]


def test_a_templated_argument_is_typed_only_when_the_run_fills_it(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    fields = tool_step_fields("calc.search", query="{topic}", limit="{topic}", exact="true")

    answer = live_answer(apply(web, draft(story), fields))

    assert answer["errors"] == {} and answer["form_errors"] == []
    assert answer["result"]["step"]["arguments"] == {
        "query": "{topic}",
        "limit": "{topic}",
        "exact": "true",
    }


def test_an_argument_naming_an_unknown_step_is_refused_by_the_engine_on_its_field(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    answer = live_answer(
        apply(web, draft(story), tool_step_fields("calc.add", a="{steps.nope.response}", b="1"))
    )

    assert answer["result"] is None
    assert "nope" in " ".join(answer["errors"]["args-a"])


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ("", "Choose the tool to call."),
        ("calc.gone", "No tool calc.gone is known"),
        ("nope.add", "Select a valid choice"),
    ],
)
def test_a_missing_or_unknown_tool_is_an_error_on_the_tool_field(
    story: Recipe, web: Client, calc: ToolServer, tool: str, message: str
) -> None:
    document = draft(story)
    document["steps"][0].update(kind="tool", tool="calc.gone")

    answer = live_answer(apply(web, document, tool_step_fields(tool)))

    assert message in " ".join(answer["errors"]["tool-tool"])
    assert answer["result"] is None


def test_picking_a_tool_answers_with_its_argument_fields_keeping_typed_values(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    url = reverse("recipe-tool-arguments", args=["story"])
    response = web.post(
        url,
        {"tools-posted": "1", "tool-tool": "calc.search", "args-query": "<b>{topic}</b>"},
        HTTP_HX_REQUEST="true",
    )

    page = html(response)
    assert 'name="args-query"' in page and 'name="args-limit"' in page
    assert "&lt;b&gt;{topic}&lt;/b&gt;</textarea>" in page
    assert "field-error" not in page  # nothing applied yet: no mistakes shown


def test_picking_a_tool_needs_a_login_and_the_right_to_edit(
    story: Recipe, stranger_web: Client, calc: ToolServer
) -> None:
    url = reverse("recipe-tool-arguments", args=["story"])

    assert Client().post(url, {"tool-tool": "calc.add"}).status_code == 302
    assert stranger_web.post(url, {"tool-tool": "calc.add"}).status_code in (403, 404)
    assert stranger_web.get(url).status_code == 405


def test_picking_an_unknown_tool_answers_with_no_fields(
    story: Recipe, web: Client, calc: ToolServer
) -> None:
    url = reverse("recipe-tool-arguments", args=["story"])

    response = web.post(url, {"tools-posted": "1", "tool-tool": "x.y"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert "args-" not in response.content.decode()


# -- the run monitor ---------------------------------------------------------------------------


def test_the_monitor_shows_a_steps_tool_calls_escaped(
    story: Recipe, web: Client, author: Any
) -> None:
    from runner.models import StepRun
    from workflows.services import recipe_publish

    version = recipe_publish(user=author, recipe=story)
    run = Run.objects.create(recipe=story, version=version, created_by=author, status="succeeded")
    StepRun.objects.create(
        run=run,
        seq=1,
        step_key="write",
        kind="llm",
        status="succeeded",
        details={
            "tool_calls": [
                {
                    "tool": "calc.add",
                    "arguments": {"a": 1, "b": "<script>x</script>"},
                    "result": "3",
                    "is_error": False,
                    "truncated": False,
                    "latency_ms": 12,
                },
                {
                    "tool": "calc.search",
                    "arguments": {},
                    "result": "<img src=x onerror=alert(1)>",
                    "is_error": True,
                    "error": "the tool said no",
                    "truncated": True,
                    "latency_ms": 7,
                    "scripted": True,
                },
            ]
        },
    )

    page = html(web.get(reverse("run-monitor", args=[run.pk])))

    assert 'aria-label="Tool calls of step 1"' in page
    assert "Tool calls <span" in page and "(2)" in page
    assert '<code class="tool-name">calc.add</code>' in page
    assert "12 ms" in page and "7 ms" in page
    assert "&quot;b&quot;: &quot;&lt;script&gt;x&lt;/script&gt;&quot;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page
    assert "the tool said no" in page
    assert "truncated</span>" in page
    assert "scripted</span>" in page


# -- dry runs: a tool's answers instead of its server ------------------------------------------


@pytest.fixture
def calling(author: Any, story_actors: None, calc: ToolServer) -> Recipe:
    """The story recipe, published, its first step offered calc.add."""
    from tests.editor.conftest import story_document
    from workflows.services import recipe_import, recipe_publish

    document = story_document()
    document["steps"][0]["tools"] = ["calc.add"]
    recipe = recipe_import(user=author, data=document).recipe
    recipe_publish(recipe=recipe, user=author)
    return recipe


def test_the_run_form_offers_answers_for_each_tool_a_step_calls(
    web: Client, calling: Recipe
) -> None:
    page = html(web.get("/recipes/story/run/"))

    assert 'name="script_tool.calc.add"' in page
    assert "Answers of tool calc.add" in page


def test_a_test_run_takes_the_tools_answers_from_the_script(web: Client, calling: Recipe) -> None:
    response = htmx_post(
        web,
        reverse("recipe-testrun", args=[calling.slug]),
        None,
        start="1",
        input_topic="owls",
        **{"script_tool.calc.add": '{"sum": 5}\n---\n@error: the calculator is off'},
    )

    assert response.status_code == 200
    assert response.context["form"].errors == {}
    assert Run.objects.get().script == {
        "tool.calc.add": ['{"sum": 5}', "@error: the calculator is off"]
    }
