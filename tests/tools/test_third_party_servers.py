"""Third-party MCP servers, real processes speaking the real protocol: mcp-server-time and
mcp-server-git over stdio, server-everything over stdio and streamable HTTP.

Each is registered as staff register servers (the API), its tools discovered, and called from a
tool step of a real run and from the model's tool loop (the stub model server answering with a
tool call); server-everything also times out, reports progress, floods and fails.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from runner import services
from runner.models import Run, StepRun
from tests.factories import UserFactory
from tests.live_server import ROOT
from tests.runner.providers.stub_server import StubServer, reply, tool_calls
from tests.runner.recipes import branch, drive, publish_document, steps, stub_actor
from tests.tools.conftest import SECRET, SECRET_ENV
from tests.tools.third_party import (
    INHERITED_ENV,
    EverythingOverHttp,
    make_repository,
    require_servers,
    stdio_commands,
)
from tools import client
from tools.client import ToolError
from tools.models import ToolServer
from workflows.models import Actor, Recipe

pytestmark = pytest.mark.django_db

SERVERS = "/api/tool-servers/"
# A stdio server still busy when its time is up gets its stdin closed, then SIGTERM after 2 s
# (the MCP SDK's shutdown): the call ends that much after its timeout at most, give or take
# a loaded machine.
STDIO_STOP_S = 2
SLACK_S = 3


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    require_servers()


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    return make_repository(tmp_path / "repo")


@pytest.fixture
def commands(settings: Any, repository: Path) -> None:
    """The servers' commands, as an operator adds them in MCP_STDIO_COMMANDS."""
    settings.MCP_STDIO_COMMANDS = {**settings.MCP_STDIO_COMMANDS, **stdio_commands(repository)}


@pytest.fixture(scope="module")
def everything_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EverythingOverHttp]:
    log = tmp_path_factory.mktemp("everything") / "server.log"
    with EverythingOverHttp(log) as server:
        yield server


def register(staff_api: APIClient, **body: Any) -> ToolServer:
    """Register a server through the API and discover its tools, as staff do."""
    created = staff_api.post(SERVERS, body, format="json")
    assert created.status_code == 201, created.json()
    discovered = staff_api.post(f"{SERVERS}{body['name']}/discover")
    assert discovered.status_code == 200, discovered.json()
    assert discovered.json()["discovery_error"] == ""
    return ToolServer.objects.get(name=body["name"])


@pytest.fixture
def time_server(staff_api: APIClient, commands: None) -> ToolServer:
    return register(staff_api, name="time", transport="stdio", command="time", timeout_s=30)


@pytest.fixture
def git_server(staff_api: APIClient, commands: None) -> ToolServer:
    return register(staff_api, name="git", transport="stdio", command="git", timeout_s=30)


@pytest.fixture(params=["stdio", "http"])
def everything(
    request: pytest.FixtureRequest, staff_api: APIClient, commands: None, allow_loopback: None
) -> ToolServer:
    """server-everything, once over each transport."""
    if request.param == "stdio":
        return register(
            staff_api, name="everything", transport="stdio", command="everything", timeout_s=30
        )
    http: EverythingOverHttp = request.getfixturevalue("everything_http")
    return register(staff_api, name="everything", transport="http", url=http.mcp_url, timeout_s=30)


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="toolowner")


@pytest.fixture
def model(stub_server: StubServer, allow_loopback: None) -> Actor:
    """The stub model server's actor (allowed with the rest of 127.0.0.1)."""
    return stub_actor(stub_server, "t-stub")


def publish(owner: Any, *step_list: dict[str, Any], inputs: tuple[str, ...] = ()) -> Recipe:
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "third-party",
            "name": "Third-party tools",
            "inputs": {name: {"type": "string", "required": True} for name in inputs},
            # The stub model's actor, for the steps that ask it.
            "actors": {"model": "t-stub"} if any("actor" in s for s in step_list) else {},
            "steps": list(step_list),
        },
    )


def tool_step(key: str, tool: str, arguments: dict[str, str], **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "name": key,
        "kind": "tool",
        "tool": tool,
        "arguments": arguments,
        "branches": fields.pop("branches", []),
        **fields,
    }


def ask_step(tools: list[str], **fields: Any) -> dict[str, Any]:
    return {
        "key": "ask",
        "name": "Ask",
        "actor": "model",
        "prompt": "Use your tools.",
        "tools": tools,
        "branches": fields.pop("branches", []),
        **fields,
    }


def run(owner: Any, recipe: Recipe, **inputs: str) -> Run:
    return drive(services.run_start(user=owner, recipe=recipe, inputs=inputs))


def reasons(step_run: StepRun) -> dict[str, str]:
    return {e.branch: e.reason for e in step_run.evaluations.all()}


HANDLED = {"type": "tool_error", "operator": "failed"}


def handled(name: str = "broke") -> dict[str, Any]:
    """A branch that ends the run when the step's tool call failed."""
    return branch(name, 1, HANDLED, "@end", action="END_RECIPE")


def sent_back(stub_server: StubServer) -> dict[str, Any]:
    """Return the tool message the loop sent back to the model after its call."""
    message: dict[str, Any] = stub_server.chat_requests[1].json["messages"][2]
    assert message["role"] == "tool"
    return message


def offered(stub_server: StubServer) -> dict[str, dict[str, Any]]:
    """Return the functions offered to the model in its first request, by name."""
    tools = stub_server.chat_requests[0].json["tools"]
    return {tool["function"]["name"]: tool["function"] for tool in tools}


# -- mcp-server-time -----------------------------------------------------------------------


def test_the_time_server_lists_its_tools_with_their_schemas(time_server: ToolServer) -> None:
    tools = {tool["name"]: tool for tool in time_server.tools}

    assert set(tools) == {"get_current_time", "convert_time"}
    schema = tools["get_current_time"]["input_schema"]
    assert schema["required"] == ["timezone"]
    assert schema["properties"]["timezone"]["type"] == "string"
    assert "IANA timezone" in schema["properties"]["timezone"]["description"]
    assert set(tools["convert_time"]["input_schema"]["required"]) == {
        "source_timezone",
        "time",
        "target_timezone",
    }


def test_a_tool_step_gets_the_time_in_a_timezone(owner: Any, time_server: ToolServer) -> None:
    tokyo = {
        "type": "field_compare",
        "operator": "equals",
        "field": "timezone",
        "value": "Asia/Tokyo",
    }
    now = tool_step(
        "now",
        "time.get_current_time",
        {"timezone": "{zone}"},
        branches=[branch("in_tokyo", 1, tokyo, "@complete")],
    )

    done = run(owner, publish(owner, now, inputs=("zone",)), zone="Asia/Tokyo")

    assert done.status == "succeeded", done.error
    step = steps(done)["now"]
    answer = json.loads(step.response)
    assert answer["timezone"] == "Asia/Tokyo"
    assert answer["datetime"].endswith("+09:00")  # Japan keeps no summer time
    assert reasons(step)["in_tokyo"] == 'field timezone "Asia/Tokyo" == "Asia/Tokyo"'
    assert step.details["tool_calls"][0]["arguments"] == {"timezone": "Asia/Tokyo"}


def test_an_invalid_timezone_fails_the_step_with_the_servers_reason(
    owner: Any, time_server: ToolServer
) -> None:
    now = tool_step("now", "time.get_current_time", {"timezone": "{zone}"})

    done = run(owner, publish(owner, now, inputs=("zone",)), zone="Mars/Olympus_Mons")

    assert done.status == "failed"
    step = steps(done)["now"]
    assert step.status == "failed"
    assert step.error.startswith("time.get_current_time reported an error: ")
    assert "Invalid timezone" in step.error and "Mars/Olympus_Mons" in step.error
    assert step.details["tool_calls"][0]["is_error"] is True


def test_the_model_asks_the_time_server_in_its_tool_loop(
    owner: Any, time_server: ToolServer, model: Actor, stub_server: StubServer
) -> None:
    stub_server.enqueue(
        tool_calls(("time__get_current_time", {"timezone": "Europe/Paris"})),
        reply("It is morning in Paris."),
    )

    done = run(owner, publish(owner, ask_step(["time.get_current_time"])))

    assert done.status == "succeeded", done.error
    assert steps(done)["ask"].response == "It is morning in Paris."
    function = offered(stub_server)["time__get_current_time"]
    assert function["parameters"]["required"] == ["timezone"]
    answer = json.loads(sent_back(stub_server)["content"])
    assert answer["timezone"] == "Europe/Paris"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0[12]:00", answer["datetime"])


# -- mcp-server-git ------------------------------------------------------------------------


def test_the_git_server_lists_its_tools_with_their_schemas(git_server: ToolServer) -> None:
    tools = {tool["name"]: tool for tool in git_server.tools}

    assert {"git_status", "git_log", "git_diff", "git_show", "git_commit", "git_branch"} <= set(
        tools
    )
    log = tools["git_log"]["input_schema"]
    assert "repo_path" in log["required"]
    assert log["properties"]["max_count"]["type"] == "integer"


def test_tool_steps_read_the_status_and_the_log_of_a_repository(
    owner: Any, git_server: ToolServer, repository: Path
) -> None:
    status = tool_step("status", "git.git_status", {"repo_path": "{repo}"})
    log = tool_step("log", "git.git_log", {"repo_path": "{repo}", "max_count": "1"})

    done = run(owner, publish(owner, status, log, inputs=("repo",)), repo=str(repository))

    assert done.status == "succeeded", done.error
    ran = steps(done)
    assert "On branch main" in ran["status"].response
    assert "notes.txt" in ran["status"].response  # untracked
    assert "Second commit" in ran["log"].response
    assert "First commit" not in ran["log"].response
    call = ran["log"].details["tool_calls"][0]
    assert call["arguments"] == {"repo_path": str(repository), "max_count": 1}  # typed


def test_a_repository_outside_the_configured_one_is_the_servers_error(
    owner: Any, git_server: ToolServer, repository: Path
) -> None:
    status = tool_step(
        "status", "git.git_status", {"repo_path": "{repo}"}, branches=[handled("refused")]
    )

    done = run(owner, publish(owner, status, inputs=("repo",)), repo=str(repository.parent))

    step = steps(done)["status"]
    assert step.status == "failed"
    assert "is outside the allowed repository" in step.error
    assert reasons(step)["refused"].startswith("git.git_status failed: ")
    assert done.status == "ended"  # handled by the branch


def test_the_model_reads_the_log_in_its_tool_loop(
    owner: Any, git_server: ToolServer, repository: Path, model: Actor, stub_server: StubServer
) -> None:
    stub_server.enqueue(
        tool_calls(("git__git_log", {"repo_path": str(repository), "max_count": 5})),
        reply("Two commits."),
    )

    done = run(owner, publish(owner, ask_step(["git.git_log", "git.git_status"])))

    assert done.status == "succeeded", done.error
    assert steps(done)["ask"].response == "Two commits."
    assert set(offered(stub_server)) == {"git__git_log", "git__git_status"}
    content = sent_back(stub_server)["content"]
    assert "Second commit" in content and "First commit" in content


# -- server-everything, over stdio and streamable HTTP -------------------------------------


def test_everything_lists_its_tools_with_their_schemas(everything: ToolServer) -> None:
    tools = {tool["name"]: tool for tool in everything.tools}

    assert {
        "echo",
        "get-sum",
        "get-env",
        "trigger-long-running-operation",
        "gzip-file-as-resource",
        "get-resource-links",
    } <= set(tools)
    schema = tools["get-sum"]["input_schema"]
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["required"] == ["a", "b"]
    assert schema["properties"]["a"]["type"] == "number"


def test_a_tool_step_adds_with_everything(owner: Any, everything: ToolServer) -> None:
    five = {"type": "pattern_match", "operator": "regex_match", "value": r"is 5\.$"}
    add = tool_step(
        "add",
        "everything.get-sum",
        {"a": "{a}", "b": "{b}"},
        branches=[branch("five", 1, five, "@complete")],
    )

    done = run(owner, publish(owner, add, inputs=("a", "b")), a="2", b="3")

    assert done.status == "succeeded", done.error
    step = steps(done)["add"]
    assert step.response == "The sum of 2 and 3 is 5."
    assert step.details["tool_calls"][0]["arguments"] == {"a": 2, "b": 3}
    assert "five" in reasons(step)


def test_the_model_echoes_with_everything_in_its_tool_loop(
    owner: Any, everything: ToolServer, model: Actor, stub_server: StubServer
) -> None:
    stub_server.enqueue(
        tool_calls(("everything__echo", {"message": "hello there"})), reply("It said hello.")
    )

    done = run(owner, publish(owner, ask_step(["everything.echo"])))

    assert done.status == "succeeded", done.error
    assert sent_back(stub_server)["content"] == "Echo: hello there"
    assert offered(stub_server)["everything__echo"]["parameters"]["required"] == ["message"]


def test_a_long_running_tool_times_out_saying_how_far_it_got(
    owner: Any, everything: ToolServer
) -> None:
    # Progress every half second, for a minute: the step's 6 s (a node server's start
    # included, on a busy machine) run out long before.
    slow = tool_step(
        "slow",
        "everything.trigger-long-running-operation",
        {"duration": "60", "steps": "120"},
        timeout_s=6,
        branches=[handled("too_slow")],
    )

    done = run(owner, publish(owner, slow))

    step = steps(done)["slow"]
    assert step.status == "failed"
    assert re.fullmatch(
        r"tool server 'everything' timed out after 6 s \(the tool's last progress: \d+ of 120\)",
        step.error,
    ), step.error
    assert reasons(step)["too_slow"].startswith("everything.trigger-long-running-operation failed")
    stop = STDIO_STOP_S if everything.transport == "stdio" else 0
    assert step.latency_ms is not None and step.latency_ms < (6 + stop + SLACK_S) * 1000
    assert done.status == "ended"  # handled by the branch: no stranded run


def test_a_long_running_tool_answers_once_done_after_its_progress(everything: ToolServer) -> None:
    result = client.call(everything, "trigger-long-running-operation", {"duration": 1, "steps": 4})

    assert result.text == "Long running operation completed. Duration: 1 seconds, Steps: 4."
    assert not result.is_error


def test_the_tool_loop_times_out_on_a_long_running_tool(
    owner: Any, everything: ToolServer, model: Actor, stub_server: StubServer
) -> None:
    stub_server.enqueue(
        tool_calls(("everything__trigger-long-running-operation", {"duration": 60, "steps": 2}))
    )
    late = {"type": "execution_timeout", "operator": "equals", "value": True}
    ask = ask_step(
        ["everything.trigger-long-running-operation"],
        max_tool_seconds=3,
        branches=[branch("late", 1, late, "@end", action="END_RECIPE")],
    )

    done = run(owner, publish(owner, ask))

    step = steps(done)["ask"]
    assert step.status == "timed_out"
    assert "did not finish within max_tool_seconds 3 s (1 tool call made)" in step.error
    call = step.details["tool_calls"][0]
    assert re.fullmatch(r"tool server 'everything' timed out after [23](\.\d\d?)? s", call["error"])
    stop = STDIO_STOP_S if everything.transport == "stdio" else 0
    assert step.latency_ms is not None and step.latency_ms < (6 + stop + SLACK_S) * 1000
    assert "late" in reasons(step)


def test_a_tool_error_fails_the_step_with_the_tools_reason(
    owner: Any, everything: ToolServer
) -> None:
    gzip = tool_step(
        "gzip",
        "everything.gzip-file-as-resource",
        {"data": "file:///etc/passwd", "outputType": "resource"},
    )

    done = run(owner, publish(owner, gzip))

    assert done.status == "failed"
    step = steps(done)["gzip"]
    assert step.error == (
        "everything.gzip-file-as-resource reported an error: Error processing file "
        "file:///etc/passwd: Unsupported URL protocol for file:///etc/passwd. "
        "Only http, https, and data URLs are supported."
    )
    assert step.details["tool_calls"][0]["is_error"] is True


def test_a_result_larger_than_the_limit_is_cut_and_flagged(
    owner: Any, everything: ToolServer, settings: Any
) -> None:
    settings.TOOL_RESULT_MAX_CHARS = 1000
    echo = tool_step("echo", "everything.echo", {"message": "{text}"})

    done = run(owner, publish(owner, echo, inputs=("text",)), text="y" * 5000)

    assert done.status == "succeeded", done.error
    step = steps(done)["echo"]
    assert step.response == "Echo: " + "y" * 994
    assert step.details["tool_calls"][0]["truncated"] is True


def test_resource_links_and_images_are_described_not_dropped(everything: ToolServer) -> None:
    links = client.call(everything, "get-resource-links", {"count": 2})
    image = client.call(everything, "get-tiny-image", {})

    described = re.findall(r"\[resource link: (.+) <(\S+)>\]", links.text)
    assert len(described) == 2
    assert all(uri.startswith("demo://resource/") for _, uri in described)
    assert "[image: image/png]" in image.text


def test_an_http_answer_past_the_byte_ceiling_is_a_clear_error(
    everything: ToolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "MAX_RESPONSE_BYTES", 1024 * 1024)
    message = "z" * (2 * 1024 * 1024)

    if everything.transport == "stdio":
        # No ceiling on a configured command's pipe: the text is cut as any result's is.
        result = client.call(everything, "echo", {"message": message})
        assert result.truncated
        return
    with pytest.raises(
        ToolError, match=r"^tool server 'everything': its answer is larger than 1 MB"
    ):
        client.call(everything, "echo", {"message": message})


# -- what a stdio server gets, and where an HTTP server may be -----------------------------


def test_a_stdio_server_gets_none_of_the_apps_environment(
    staff_api: APIClient, commands: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server = register(
        staff_api, name="everything", transport="stdio", command="everything", timeout_s=30
    )

    result = client.call(server, "get-env", {})

    environment = json.loads(result.text)
    assert set(environment) <= INHERITED_ENV
    assert "PATH" in environment
    assert SECRET not in result.text


def test_an_http_server_on_loopback_is_refused_unless_allowed(
    staff_api: APIClient, everything_http: EverythingOverHttp
) -> None:
    body = {"name": "everything", "transport": "http", "url": everything_http.mcp_url}

    refused = staff_api.post(SERVERS, body, format="json")

    assert refused.status_code == 400
    assert "url: refused: 127.0.0.1, a loopback address" in json.dumps(refused.json())
    assert not ToolServer.objects.exists()


def test_an_http_call_logs_no_session_id(
    staff_api: APIClient,
    everything_http: EverythingOverHttp,
    allow_loopback: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = register(
        staff_api, name="everything", transport="http", url=everything_http.mcp_url, timeout_s=30
    )
    caplog.set_level(logging.INFO)

    client.call(server, "echo", {"message": "quiet"})

    assert not [r for r in caplog.records if r.name.startswith("mcp")], caplog.text


def test_the_operator_adds_stdio_servers_in_the_environment() -> None:
    show = (
        "import json, django; django.setup(); from django.conf import settings; "
        "print(json.dumps(settings.MCP_STDIO_COMMANDS))"
    )
    added = {"time": ["python3", "-m", "mcp_server_time", "--local-timezone", "UTC"]}

    def settings_with(value: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", show],
            env={
                "PATH": "/usr/bin:/bin",
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "DEBUG": "1",
                "MCP_STDIO_COMMANDS": value,
            },
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    shown = settings_with(json.dumps(added))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {
        "demo": [sys.executable, "-m", "tools.demo_server"],
        **added,
    }
    for value, why in [
        ("[1, 2]", "MCP_STDIO_COMMANDS is a JSON object"),
        ('{"time": "python -m mcp_server_time"}', "MCP_STDIO_COMMANDS.time: a list"),
        ('{"Time!": ["x"]}', "'Time!' is not a name"),
        ("{time: x}", "MCP_STDIO_COMMANDS is not JSON"),
    ]:
        failed = settings_with(value)
        assert failed.returncode != 0
        assert why in failed.stderr, failed.stderr
