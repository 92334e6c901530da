"""Driving the editor page in the browser tests: apply a panel, wait for it, draw a branch."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import TimeoutError as PlaywrightTimeout


def apply_panel(page: Any) -> None:
    """Wait for what was typed in the Properties panel to apply, as it does a moment after."""
    wait_applied(page, "#panel")


def wait_applied(page: Any, panel: str) -> None:
    wait_settled(page)
    page.wait_for_selector(f"{panel} .panel-state.applied")


def outline_text(page: Any, expected: str) -> str:
    """Return the step/branch list's text once it shows `expected`.

    The list is drawn in the first idle moment after the canvas, so after `ready`; and its rows
    are `content-visibility: auto`, so `innerText` leaves a row out until a frame has rendered
    it. The row's text content is read, waited for as the list is drawn.
    """
    try:
        page.wait_for_function(
            "(expected) => document.getElementById('outline').textContent.includes(expected)",
            arg=expected,
            timeout=10000,
        )
    except PlaywrightTimeout:
        raise AssertionError(
            f"the step list does not show {expected!r}: {page.text_content('#outline')!r}"
        ) from None
    return page.text_content("#outline") or ""


def add_step(page: Any, kind: str) -> None:
    """Add a step of `kind` from the palette (the "Add step" button), as an author clicks it."""
    page.click("#btn-palette")
    page.click(f"#palette [data-add-step={kind}]")


def wait_saved(page: Any) -> None:
    page.wait_for_function("document.getElementById('save-state').textContent === 'Saved'")


def wait_settled(page: Any) -> None:
    """Wait until the editor has nothing in flight: no edit still to check, no request.

    The lint panel's answer to the last edit can change its height and move the side panel:
    a drag planned on the old layout would drop on the wrong row. And htmx wires up what it
    swapped in only when the swap settles: a form clicked before that submits as a plain form.
    """
    page.wait_for_function("branchline.settled()")


def click_settled(page: Any, selector: str) -> None:
    """Click a control of a panel once htmx has wired it up."""
    page.wait_for_selector(selector)
    wait_settled(page)
    page.click(selector)


def canvas_point(page: Any, js_element: str) -> dict[str, float]:
    """Return the page coordinates of a canvas element's rendered centre, once it holds still.

    Until the author touches the view, the first fit follows the canvas's size, which changes
    when the first check's problems arrive: the editor must be settled, and a frame drawn after
    it (the canvas's resize observer runs then), before a point is taken.
    """
    wait_settled(page)
    return page.evaluate(
        """async (expr) => {
            await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
            const ele = eval(expr);
            const box = document.getElementById('cy').getBoundingClientRect();
            const p = ele.isNode() ? ele.renderedPosition() : ele.renderedMidpoint();
            return {x: box.left + p.x, y: box.top + p.y};
        }""",
        js_element,
    )


def open_step_menu(page: Any, key: str) -> dict[str, float]:
    """Right-click a step; once its menu shows, return the point clicked."""
    point = canvas_point(page, f"branchline.nodeByKey('{key}')")
    page.mouse.click(point["x"], point["y"], button="right")
    page.wait_for_selector("#cm-duplicate", state="visible")
    return point


def drag_branch(page: Any, source_key: str, target_key: str) -> None:
    """Draw a branch with the mouse: from the source step's handle to the target step."""
    source = canvas_point(page, f"branchline.nodeByKey('{source_key}')")
    target = canvas_point(page, f"branchline.nodeByKey('{target_key}')")
    page.mouse.move(source["x"], source["y"])
    page.wait_for_selector("#eh-handle:not([hidden])")
    handle = page.locator("#eh-handle").bounding_box()
    start = {"x": handle["x"] + handle["width"] / 2, "y": handle["y"] + handle["height"] / 2}
    page.mouse.move(start["x"], start["y"])
    page.mouse.down()
    page.mouse.move(target["x"], target["y"], steps=12)
    # Edge handles snaps to a step once the pointer has rested on it (its hover delay).
    page.wait_for_function(f"branchline.nodeByKey('{target_key}').hasClass('eh-target')")
    page.mouse.up()


def selected_key(page: Any) -> str | None:
    return page.evaluate(
        "() => { const s = branchline.cy.$(':selected'); return s.length ? s.data('key') : null; }"
    )


def edge_classes(page: Any, step: str, branch: str) -> list[str]:
    return page.evaluate("([s, b]) => branchline.edgeByName(s, b).classes()", [step, branch])
