"""Time how long the editor takes to open a recipe of 200 (or 1,000) steps, two branches each.

Starts the app (daphne, a throwaway SQLite database) with a generated recipe whose steps have no
positions, so the editor lays it out (dagre, left to right) on open; then opens the editor in
headless Chromium and reads the `editor-ready` mark, set once the graph is laid out and drawn
and the page takes input. That figure is measured from the start of navigation, so it includes
the server's answer, parsing, scripts, layout and the first frames. It then checks the page
answers a click on a step (selection) and a wheel zoom.

    .venv/bin/python benchmarks/editor_open.py [--steps 200] [--runs 5] [--budget 1.5]

Prints every run, and the median against the budget: exit status 0 when within it, 1 when not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
PASSWORD = "bench-password-123"


def recipe_document(steps: int) -> dict[str, Any]:
    """Return a recipe of `steps` steps, two branches each, without canvas positions."""
    keys = [f"step_{i:03d}" for i in range(1, steps + 1)]
    document_steps = []
    for i, key in enumerate(keys):
        following = keys[i + 1] if i + 1 < steps else "@complete"
        skip = keys[i + 2] if i + 2 < steps else "@complete"
        document_steps.append(
            {
                "key": key,
                "name": f"Step {i + 1}",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Continue: {step1_response}" if i else "Begin.",
                "branches": [
                    {
                        "name": "too_short",
                        "priority": 1,
                        "when": {"type": "length_check", "operator": "less_than", "value": 200},
                        "action": "CONTINUE",
                        "target": following,
                    },
                    {
                        "name": "otherwise",
                        "priority": 999,
                        "when": {"type": "default"},
                        "action": "DEFAULT_CONTINUE",
                        "target": skip,
                    },
                ],
            }
        )
    return {
        "format": "branchline.recipe/v1",
        "slug": "bench-editor",
        "name": f"Editor benchmark ({steps} steps)",
        "description": "",
        "inputs": {},
        "actors": {"writer": "bench-writer"},
        "steps": document_steps,
    }


def prepare(env: dict[str, str], steps: int, workdir: Path) -> None:
    """Migrate the throwaway database and create the user, the actor and the recipe."""
    # The recipe goes by file: a 1,000-step document inline in `-c` is over the argv limit.
    document = workdir / "recipe.json"
    document.write_text(json.dumps(recipe_document(steps)))
    script = f"""
import json
from pathlib import Path
from django.contrib.auth import get_user_model
from workflows.models import Actor
from workflows.services import recipe_import
user = get_user_model().objects.create_user("bench", password={PASSWORD!r})
Actor.objects.create(name="bench-writer", kind="llm", provider="scripted", config={{"replies": ["x"]}})
recipe_import(user=user, data=json.loads(Path({str(document)!r}).read_text()))
"""
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [python, "manage.py", "shell", "-v", "0", "-c", script], cwd=ROOT, env=env, check=True
    )


def measure(url: str, runs: int) -> tuple[list[float], dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    timings: list[float] = []
    extra: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"],
        )
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.goto(url + "/login/")
        page.fill("#id_username", "bench")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(url + "/")
        for run in range(runs + 1):  # the first run warms the browser and server caches
            page.goto("about:blank")
            page.goto(url + "/recipes/bench-editor/")
            page.wait_for_function("window.branchline && window.branchline.ready", timeout=60000)
            ready = page.evaluate("performance.getEntriesByName('editor-ready')[0].startTime")
            phases = page.evaluate(
                """() => {
                    const nav = performance.getEntriesByType('navigation')[0];
                    const at = (name) => performance.getEntriesByName(name)[0].startTime;
                    return {server: nav.responseEnd, scripts: at('editor-start'),
                            layout: at('editor-laid-out'), ready: at('editor-ready')};
                }"""
            )
            for name, value in phases.items():
                if run:
                    extra.setdefault(f"phase_{name}", []).append(value / 1000)
            counts = page.evaluate(
                "[branchline.cy.nodes('[kind = \"step\"]').length,"
                " branchline.cy.edges('[kind = \"branch\"]').length]"
            )
            if run == 0:
                extra["steps"], extra["branches"] = counts
                extra["cold_s"] = ready / 1000
                continue
            timings.append(ready / 1000)
        # Interactive: a click selects a step and a wheel turn zooms, at once. Measured once the
        # first lint answer is in.
        page.wait_for_function("branchline.settled()", timeout=60000)
        page.evaluate(
            "branchline.cy.zoom(1); branchline.cy.center(branchline.nodeByKey('step_001')); null"
        )
        box = page.locator("#cy").bounding_box()
        point = page.evaluate(
            "(() => { const p = branchline.nodeByKey('step_001').renderedPosition();"
            " return {x: p.x, y: p.y}; })()"
        )
        started = time.perf_counter()
        page.mouse.click(box["x"] + point["x"], box["y"] + point["y"])
        page.wait_for_function("branchline.cy.$(':selected').data('key') === 'step_001'")
        extra["click_to_select_s"] = time.perf_counter() - started
        zoom = page.evaluate("branchline.cy.zoom()")
        started = time.perf_counter()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.wheel(0, 300)
        page.wait_for_function(f"branchline.cy.zoom() !== {zoom}")
        extra["wheel_to_zoom_s"] = time.perf_counter() - started
        browser.close()
    return timings, extra


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=float, default=1.5, help="seconds")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"Chromium is not installed at {CHROMIUM}", file=sys.stderr)
        return 2
    if not (ROOT / "static" / "vendor" / "cytoscape").exists():
        print("static/vendor is missing: run `make vendor` first", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="editor-bench-"))
    env = {
        **os.environ,
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
        "EMBEDDED_WORKER": "0",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    env.pop("REDIS_URL", None)
    server = None
    try:
        prepare(env, args.steps, workdir)
        server = LiveServer(env, verbosity=0).start().wait_ready(timeout=30)
        timings, extra = measure(server.url, args.runs)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    median = statistics.median(timings)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"editor open: {int(extra['steps'])} steps, {int(extra['branches'])} branches, "
        "no saved positions (dagre layout on open)"
    )
    print(f"  cold first open:       {extra['cold_s']:.3f} s")
    print("  open+layout+interactive: " + ", ".join(f"{t:.3f}" for t in timings) + " s")
    print(f"  median {median:.3f} s, worst {max(timings):.3f} s (budget {args.budget:.1f} s)")
    server, scripts, layout, ready = (
        statistics.median(extra[f"phase_{name}"])
        for name in ("server", "scripts", "layout", "ready")
    )
    print(
        f"  median phases: page received {server:.3f} s, scripts start {scripts:.3f} s, "
        f"laid out {layout:.3f} s, drawn and ready {ready:.3f} s"
    )
    print(
        f"  click to select a step: {extra['click_to_select_s'] * 1000:.0f} ms; "
        f"wheel to zoom: {extra['wheel_to_zoom_s'] * 1000:.0f} ms"
    )
    print(f"  load average {load:.2f} on {os.cpu_count()} CPUs")
    verdict = "PASS" if median < args.budget else "FAIL"
    print(
        f"{verdict}: median {median:.3f} s {'<' if median < args.budget else '>='} {args.budget:.1f} s"
    )
    return 0 if median < args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
