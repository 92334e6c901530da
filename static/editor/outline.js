/*
 * outline.js: the step/branch list beside the canvas, drawn here from the graph (at once on
 * open, then a frame after each edit, keeping the keyboard focus on its item), and the lists
 * that point at the canvas (the step/branch list, the problems, the save errors, the
 * coverage): clicking an item selects its step or branch; arrow keys move through the
 * step/branch list.
 */
import { edgeByName, selectElement } from "./canvas.js";
import { summarize } from "./catalog.js";
import { lintElements } from "./lint.js";
import { branchEdges, elementForPath, stepNodes, visualTarget } from "./recipe-graph.js";
import * as store from "./store.js";
import { showTab } from "./tabs.js";

const outline = document.getElementById("outline");
let drawPending = false;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Each button's accessible name is its visible text plus hidden words of context: a name that
// does not contain what is shown fails axe's label-content-name-mismatch.
function hidden(text) {
  return el("span", "visually-hidden", text);
}

function text(value) {
  return typeof value === "string" ? value : "";
}

function stepItem(node, i) {
  const step = node.data("step");
  const key = node.data("key");
  const name = text(step.name) || key;
  const button = el("button", "outline-item step");
  button.type = "button";
  button.dataset.path = "steps[" + i + "]";
  const seq = el("span", "o-seq", String(i + 1));
  seq.setAttribute("aria-hidden", "true");
  button.append(hidden("Step"), " ", seq, " ", el("span", "o-name", name), " ", el("span", "o-kind", step.kind || "llm"));
  if (text(step.actor)) {
    const actor = el("span", "o-actor");
    actor.append(hidden("actor"), " " + step.actor);
    button.append(" ", actor);
  }
  return { button: button, name: name, key: key };
}

function branchItem(edge, i, j, stepName, stepKey, lastKey) {
  const branch = edge.data("branch");
  const inactive = branch.active === false;
  const button = el("button", "outline-item branch" + (inactive ? " inactive" : ""));
  button.type = "button";
  button.dataset.path = "steps[" + i + "].branches[" + j + "]";
  const priority = branch.priority === undefined || branch.priority === null ? "" : String(branch.priority);
  button.append(
    hidden("Branch " + text(branch.name) + " of " + stepName + ", priority"), " ",
    el("span", "o-prio", priority), " ",
    el("span", "o-summary", summarize(branch.when)), " ",
    el("span", "o-action", text(branch.action)), " ",
    el("span", "o-target", "→ " + (visualTarget(branch, stepKey, lastKey) || "next")),
  );
  if (inactive) button.append(hidden(", inactive"));
  const li = el("li");
  li.appendChild(button);
  return li;
}

/** Draw the step/branch list from the graph now. */
export function drawOutline() {
  drawPending = false;
  const nodes = stepNodes(store.graph());
  const lastKey = nodes.length ? nodes[nodes.length - 1].data("key") : "";
  const focused = document.activeElement && outline.contains(document.activeElement) ? document.activeElement.dataset.path : null;
  const title = el("h2", "panel-title", "Steps ");
  title.appendChild(el("span", "muted", "(" + nodes.length + ")"));
  const parts = [title];
  if (!nodes.length) parts.push(el("p", "muted", "No steps yet: add one with “+ Add step” above the canvas."));
  const list = el("ol", "outline-steps");
  nodes.forEach((node, i) => {
    const item = stepItem(node, i);
    const li = el("li");
    li.appendChild(item.button);
    const edges = branchEdges(node);
    if (edges.length) {
      const branches = el("ol", "outline-branches");
      edges.forEach((edge, j) => branches.appendChild(branchItem(edge, i, j, item.name, item.key, lastKey)));
      li.appendChild(branches);
    }
    list.appendChild(li);
  });
  parts.push(list);
  outline.replaceChildren(...parts);
  if (focused) {
    const again = outline.querySelector('[data-path="' + focused + '"]');
    if (again) again.focus();
  }
}

// Edits come in bursts (a paste, an undo): the list is drawn once, on the next frame.
function drawSoon() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(drawOutline);
}

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
  document.addEventListener("keydown", moveFocus);
  // The canvas comes first: the list of a thousand steps is drawn in the first quiet moment.
  const idle = window.requestIdleCallback || ((fn) => setTimeout(fn, 0));
  idle(() => drawPending || drawOutline(), { timeout: 500 });
  store.subscribe((event) => {
    if (event === "change") drawSoon();
  });
}
