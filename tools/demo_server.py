"""The demo MCP server: a calculator, a word counter and the demo recipes' names.

Run over stdio (the default, how seed_demo registers it: settings.MCP_STDIO_COMMANDS["demo"])
or over streamable HTTP with `python -m tools.demo_server --http PORT` (path /mcp). It needs no
Django: it reads the demo recipes from their JSON files next to the code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

RECIPES_DIR = Path(__file__).resolve().parent.parent / "workflows" / "demo" / "recipes"

server = MCPServer(
    "branchline-demo", instructions="Small tools for trying tool steps.", log_level="WARNING"
)


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool()
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@server.tool()
def word_count(text: str) -> dict[str, int]:
    """Count the words, characters and lines of a text."""
    return {
        "words": len(text.split()),
        "characters": len(text),
        "lines": len(text.splitlines()) if text else 0,
    }


@server.tool()
def lookup_recipe(query: str = "") -> dict[str, Any]:
    """Find the demo recipes whose slug, name or description holds the query (all when empty)."""
    needle = query.strip().lower()
    found: list[dict[str, str]] = []
    for path in sorted(RECIPES_DIR.glob("*.json")):
        try:
            recipe = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a broken file is no recipe; the others are still worth listing
        entry = {
            "slug": str(recipe.get("slug", path.stem)),
            "name": str(recipe.get("name", "")),
            "description": str(recipe.get("description", "")),
        }
        if not needle or any(needle in value.lower() for value in entry.values()):
            found.append(entry)
    return {"count": len(found), "recipes": found}


def main(argv: list[str] | None = None) -> None:
    """Serve over stdio, or over streamable HTTP on 127.0.0.1 with --http PORT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (HTTP)")
    args = parser.parse_args(argv)
    if args.http is None:
        server.run()
    else:
        server.run("streamable-http", host=args.host, port=args.http)


if __name__ == "__main__":
    main()
