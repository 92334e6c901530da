"""Third-party MCP servers, run as an operator runs them: mcp-server-time and mcp-server-git
(PyPI, installed by requirements-dev.txt) and server-everything (npm, installed by `npm ci`)
over stdio, and server-everything over streamable HTTP in a process of its own.

They are not the project's: missing, the tests that need them are skipped, except on CI
(`CI=true`), where that is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_server import ROOT, LiveServer

EVERYTHING = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
# What the SDK passes on to a stdio server (mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS).
INHERITED_ENV = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}


def require_servers() -> None:
    """Skip (fail on CI) unless the third-party servers and what runs them are installed."""
    missing = [
        module
        for module in ("mcp_server_time", "mcp_server_git")
        if not importlib.util.find_spec(module)
    ]
    if not (EVERYTHING / "index.js").exists():
        missing.append(f"{EVERYTHING / 'index.js'} (make vendor)")
    missing += [program for program in ("node", "git") if shutil.which(program) is None]
    if missing:
        message = f"third-party MCP servers are not installed: {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def stdio_commands(repository: Path) -> dict[str, list[str]]:
    """Return MCP_STDIO_COMMANDS entries for the servers, git's kept to `repository`."""
    return {
        "time": [sys.executable, "-m", "mcp_server_time"],
        "git": [sys.executable, "-m", "mcp_server_git", "--repository", str(repository)],
        "everything": [_node(), str(EVERYTHING / "index.js"), "stdio"],
    }


def make_repository(path: Path) -> Path:
    """Create a git repository with two commits on `main` and a file it does not track."""
    path.mkdir()

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
            cwd=path,
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    (path / "README.md").write_text("first\n")
    git("add", "README.md")
    git("commit", "-q", "-m", "First commit")
    (path / "README.md").write_text("first\nsecond\n")
    git("commit", "-q", "-am", "Second commit")
    (path / "notes.txt").write_text("not tracked\n")
    return path


class EverythingOverHttp(LiveServer):
    """server-everything's streamable HTTP transport on a free port (endpoint `/mcp`), with
    nothing of the test run's environment but PATH."""

    name = "server-everything"

    def __init__(self, log: Path) -> None:
        super().__init__({}, log=log)
        self.env = {"PATH": os.environ.get("PATH", ""), "PORT": str(self.port)}

    def command(self) -> list[str]:
        return [_node(), str(EVERYTHING / "index.js"), "streamableHttp"]

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"


def _node() -> str:
    return shutil.which("node") or "node"
