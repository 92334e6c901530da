/*
 * outline.js: the lists that point at the canvas (the step/branch list, the problems, the save
 * errors, the coverage): clicking an item selects its step or branch; arrow keys move through
 * the step/branch list, which keeps the keyboard focus when it is re-rendered.
 */
import { edgeByName, selectElement } from "./canvas.js";
import { lintElements } from "./lint.js";
import { elementForPath } from "./recipe-graph.js";
import * as store from "./store.js";
import { showTab } from "./tabs.js";

function followPath(link) {
  const path = link.getAttribute("data-path");
  if (/^(actors|inputs|name|description)\b/.test(path)) {
    showTab("recipe", true);
    return;
  }
  const elements = store.current().elements;
  // A problem's path is in the document as it was checked, which later edits may have moved.
  const map = link.closest("#lint") ? lintElements() : elements;
  const id = elementForPath(map, path) || elementForPath(elements, path);
  if (id) selectElement(id);
}

function keepFocus() {
  let focusedPath = null;
  document.body.addEventListener("htmx:oobBeforeSwap", () => {
    const active = document.activeElement;
    focusedPath = active && active.closest && active.closest("#outline") ? active.getAttribute("data-path") : null;
  });
  document.body.addEventListener("htmx:oobAfterSwap", () => {
    if (!focusedPath) return;
    const item = document.querySelector('#outline [data-path="' + focusedPath.replace(/"/g, "") + '"]');
    if (item) item.focus();
    focusedPath = null;
  });
}

function moveFocus(evt) {
  if (["ArrowDown", "ArrowUp", "Home", "End"].indexOf(evt.key) < 0) return;
  if (!evt.target.closest || !evt.target.closest("#outline")) return;
  const items = Array.prototype.slice.call(document.querySelectorAll("#outline .outline-item"));
  const i = items.indexOf(document.activeElement);
  if (i < 0) return;
  evt.preventDefault();
  const j = evt.key === "ArrowDown" ? Math.min(items.length - 1, i + 1)
    : evt.key === "ArrowUp" ? Math.max(0, i - 1)
      : evt.key === "Home" ? 0 : items.length - 1;
  items[j].focus();
}

export function initOutline() {
  document.addEventListener("click", (evt) => {
    const link = evt.target.closest("[data-path]");
    if (link) {
      followPath(link);
      return;
    }
    const ref = evt.target.closest("[data-branch-ref]");
    if (!ref) return;
    const edge = edgeByName(ref.getAttribute("data-branch-ref"), ref.getAttribute("data-branch-name"));
    if (edge) selectElement(edge.id());
  });
  keepFocus();
  document.addEventListener("keydown", moveFocus);
}
