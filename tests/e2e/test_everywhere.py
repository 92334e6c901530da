"""Every page, everywhere: no axe-core violations in light and dark mode, the inbox and the monitor
on a phone without sideways scrolling, the editor saying it needs a wider screen, a favicon, and
the run form filled with the recipe's defaults.

axe-core comes from npm (package.json, `make vendor`); it is injected into each page here, never
served by the app. Screenshots of every page in both colour schemes go to test-artifacts/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.live_app import ROOT, AppServer

pytest_plugins = ("tests.e2e.live_app",)
pytestmark = pytest.mark.e2e

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
USERNAME = "everywhere"
PASSWORD = "e2e-everywhere-password"
PARKED = 2
STORY = (
    "The keeper of the lighthouse on Gull Point knew every storm by its voice. This one came "
    "humming, circled the tower like a cat deciding whether to come in, and stayed the night. "
    "By morning the sea was calm, and every boat was home."
)

# A staff user (the longest navigation: Admin too) who reviews for a group of their own, so that
# no other browser test's inbox sees these tasks.
SET_UP = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from tests.runner.open_tasks import park_runs
from workflows.models import Recipe

group, _ = Group.objects.get_or_create(name="everywhere-reviewers")
user = get_user_model().objects.create_user({username!r}, password={password!r}, is_staff=True)
user.groups.add(group)
park_runs(Recipe.objects.get(slug="creative-writing-qc"), user, group, {count})
"""


def signed_in(browser: Any, server: AppServer, **context: Any) -> Any:
    """Return a new browser context (viewport, colour scheme…) signed in as the test's user."""
    options = {"viewport": {"width": 1280, "height": 900}, **context}
    ctx = browser.new_context(base_url=server.url, **options)
    page = ctx.new_page()
    page.goto("/login/")
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", server.passwords[USERNAME])
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/")
    page.close()
    return ctx


@pytest.fixture(scope="module")
def everywhere_user(app_server: AppServer) -> str:
    """Create the test's user and their open tasks."""
    app_server.manage(
        "shell", "-v0", "-c", SET_UP.format(username=USERNAME, password=PASSWORD, count=PARKED)
    )
    app_server.passwords[USERNAME] = PASSWORD
    ARTIFACTS.mkdir(exist_ok=True)
    return USERNAME


@pytest.fixture(scope="module")
def finished_run(app_server: AppServer, chromium: Any, everywhere_user: str) -> Iterator[int]:
    """Start a dry run from the Run form and wait until it succeeds (the judge scores 9: no
    reviewer needed). Return the run's id."""
    ctx = signed_in(chromium, app_server)
    page = ctx.new_page()
    page.goto("/recipes/creative-writing-qc/run/")
    page.get_by_label("topic (string)").fill("a storm that befriends a lighthouse keeper")
    page.get_by_text("Scripted answers (dry run)").click()
    page.get_by_label("Answers of writer (demo-writer)").fill(STORY)
    page.get_by_label("Answers of judge (demo-judge)").fill("9")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator(".run-status .badge")).to_have_text("Succeeded", timeout=20_000)
    run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    ctx.close()
    yield run_id


def pages(run_id: int) -> dict[str, str]:
    return {
        "recipes": "/",
        "editor": "/recipes/creative-writing-qc/",
        "monitor": f"/runs/{run_id}/",
        "runs": "/runs/",
        "inbox": "/inbox/",
    }


def settle(page: Page, name: str) -> None:
    """Wait until the page has drawn what its scripts draw (axe must see the finished page)."""
    if name == "editor":
        page.wait_for_function("window.branchline && window.branchline.ready", timeout=15_000)
    elif name == "monitor":
        page.wait_for_selector("#run-graph canvas")
    elif name == "inbox":
        expect(page.locator(".task-card").first).to_be_visible()
    page.wait_for_load_state("networkidle")


def axe_violations(page: Page) -> list[str]:
    """Run axe-core (every rule axe enables by default) on the page; describe each violation."""
    assert AXE.exists(), f"axe-core is not installed at {AXE}: run `make vendor`"
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate("axe.run(document).then(result => result.violations)")
    return [
        f"{v['id']} ({v['impact']}): {v['help']}\n"
        + "\n".join(
            f"    {' '.join(map(str, node['target']))}: {node['failureSummary']}"
            for node in v["nodes"][:5]
        )
        for v in violations
    ]


def scrolls_sideways(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth > window.innerWidth"))


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_on_any_page(
    app_server: AppServer, chromium: Any, finished_run: int, scheme: str
) -> None:
    found: dict[str, list[str]] = {}
    # The login page, signed out.
    anonymous = chromium.new_context(
        base_url=app_server.url, viewport={"width": 1280, "height": 900}, color_scheme=scheme
    )
    page = anonymous.new_page()
    page.goto("/login/")
    found["login"] = axe_violations(page)
    page.screenshot(path=str(ARTIFACTS / f"everywhere-{scheme}-login.png"), full_page=True)
    anonymous.close()

    ctx = signed_in(chromium, app_server, color_scheme=scheme)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    for name, path in pages(finished_run).items():
        page.goto(path)
        settle(page, name)
        found[name] = axe_violations(page)
        page.screenshot(path=str(ARTIFACTS / f"everywhere-{scheme}-{name}.png"), full_page=True)
        if scheme == "dark":
            # The system setting is followed: the page is dark, not light with a dark browser.
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert sum(map(int, re.findall(r"\d+", background)[:3])) < 3 * 64, (name, background)
    ctx.close()

    failures = {name: v for name, v in found.items() if v}
    assert not failures, "axe-core found violations:\n" + "\n".join(
        f"{name}:\n  " + "\n  ".join(v) for name, v in failures.items()
    )
    assert errors == []


# The colours a graph is drawn in: its box's background, a step's card and text, a branch's line.
GRAPH_COLOURS = """(name) => {
    const box = name === "editor" ? document.querySelector(".canvas-area") : document.getElementById("run-graph");
    const cy = name === "editor" ? branchline.cy : box._cyreg.cy;
    const step = cy.nodes('[kind = "step"]')[0];
    return {
        background: getComputedStyle(box).backgroundColor,
        card: step.style("background-color"),
        text: step.style("color"),
        line: cy.edges()[0].style("line-color"),
        // The runs overlay's heat legend (the editor's only).
        heat: [...document.querySelectorAll("#runs-legend .swatch")].map((s) => s.style.background),
    };
}"""


def rgb(colour: str) -> tuple[int, int, int]:
    red, green, blue = map(int, re.findall(r"\d+", colour)[:3])
    return red, green, blue


def contrast(one: str, other: str) -> float:
    """The WCAG contrast ratio of two colours."""

    def luminance(colour: str) -> float:
        linear = [c / 255 for c in rgb(colour)]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in linear]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    lighter, darker = sorted([luminance(one), luminance(other)], reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def test_the_graphs_follow_the_colour_scheme_when_it_changes(
    app_server: AppServer, chromium: Any, finished_run: int
) -> None:
    ctx = signed_in(chromium, app_server, color_scheme="light")
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    for name in ("editor", "monitor"):
        page.emulate_media(color_scheme="light")
        page.goto(pages(finished_run)[name])
        settle(page, name)
        light = page.evaluate(GRAPH_COLOURS, name)
        # The system setting changes while the page is open: the graph is drawn again in it.
        page.emulate_media(color_scheme="dark")
        page.wait_for_function(
            f"(name) => ({GRAPH_COLOURS})(name).card !== {json.dumps(light['card'])}", arg=name
        )
        dark = page.evaluate(GRAPH_COLOURS, name)
        page.screenshot(path=str(ARTIFACTS / f"everywhere-turned-dark-{name}.png"))
        assert sum(rgb(light["background"])) > 3 * 230 and sum(rgb(dark["background"])) < 3 * 40
        assert sum(rgb(light["card"])) > 3 * 200 and sum(rgb(dark["card"])) < 3 * 64, (light, dark)
        assert light["line"] != dark["line"]
        if name == "editor":
            assert len(dark["heat"]) == 5 and light["heat"] != dark["heat"], (light, dark)
        for scheme, colours in (("light", light), ("dark", dark)):
            ratio = contrast(colours["text"], colours["card"])
            assert ratio >= 4.5, f"{name}, {scheme}: a step's text at {ratio:.2f}:1 ({colours})"
    ctx.close()
    assert errors == []


@pytest.mark.parametrize("width", [360, 390])
def test_the_inbox_and_the_monitor_fit_a_phone(
    app_server: AppServer, chromium: Any, finished_run: int, width: int
) -> None:
    ctx = signed_in(chromium, app_server, viewport={"width": width, "height": 844}, is_mobile=True)
    page = ctx.new_page()
    for name, path in pages(finished_run).items():
        if name == "editor":
            continue
        page.goto(path)
        settle(page, name)
        page.screenshot(path=str(ARTIFACTS / f"everywhere-{width}px-{name}.png"), full_page=True)
        assert not scrolls_sideways(page), f"{name} scrolls sideways at {width} px"
        # The whole navigation is on the dark bar, within the screen: the name and Log out too.
        bar = page.locator(".topbar").bounding_box()
        for item in [page.locator(".topbar .who"), page.get_by_role("button", name="Log out")]:
            box = item.bounding_box()
            assert box and box["x"] + box["width"] <= width, f"{name}: {item} is off screen"
            assert bar and box["y"] + box["height"] <= bar["y"] + bar["height"]
        for link in page.locator(".topbar nav a").all():
            box = link.bounding_box()
            assert box and box["x"] + box["width"] <= width, f"{name}: a nav link is off screen"

    # The inbox can be worked from the phone: a task's decisions are on screen, not past an edge.
    page.goto("/inbox/")
    card = page.locator(".task-card").first
    for decision in ("Approve", "Reject", "Revise"):
        button = card.get_by_role("button", name=decision)
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, decision
    ctx.close()


def test_the_editor_says_it_needs_a_wider_screen_on_a_phone(
    app_server: AppServer, chromium: Any, everywhere_user: str
) -> None:
    ctx = signed_in(chromium, app_server, viewport={"width": 390, "height": 844})
    page = ctx.new_page()
    page.goto("/recipes/creative-writing-qc/")
    expect(page.get_by_text("The editor needs a wider screen")).to_be_visible()
    expect(page.locator("#cy")).to_be_hidden()
    assert not scrolls_sideways(page)
    page.screenshot(path=str(ARTIFACTS / "everywhere-390px-editor.png"))
    # Wide enough, the editor is back and the note is gone.
    page.set_viewport_size({"width": 1280, "height": 900})
    expect(page.locator("#cy")).to_be_visible()
    expect(page.get_by_text("The editor needs a wider screen")).to_be_hidden()
    ctx.close()


def test_every_page_has_an_icon_and_favicon_ico_is_found(
    app_server: AppServer, chromium: Any, everywhere_user: str
) -> None:
    ctx = chromium.new_context(base_url=app_server.url)
    page = ctx.new_page()
    page.goto("/login/")
    icons = page.locator("link[rel=icon]").evaluate_all("links => links.map(l => l.href)")
    assert icons
    for href in icons:
        response = ctx.request.get(href)
        assert response.status == 200, href
        assert response.headers["content-type"].startswith("image/"), href
    # Browsers and bots still ask for /favicon.ico whatever the page links.
    response = ctx.request.get("/favicon.ico")
    assert response.status == 200
    assert response.headers["content-type"] == "image/x-icon"
    assert response.body()[:4] == b"\x00\x00\x01\x00"  # an ICO file's header
    ctx.close()


def test_the_run_form_is_filled_with_the_inputs_defaults(
    app_server: AppServer, chromium: Any, everywhere_user: str
) -> None:
    recipe = json.loads(
        Path(ROOT, "workflows", "demo", "recipes", "validation-loop.json").read_text()
    )
    default = recipe["inputs"]["question"]["default"]
    ctx = signed_in(chromium, app_server)
    page = ctx.new_page()
    page.goto("/recipes/validation-loop/run/")
    expect(page.get_by_label("question (string)")).to_have_value(default)
    ctx.close()
