/*
 * branch-order.js: a step's branches in priority order, in the step panel: drag a branch in the
 * list (or use its arrows) to give the branches the priorities they had, in the new order.
 */
import { openPanel } from "./panels.js";
import { clone } from "./recipe-graph.js";
import * as store from "./store.js";

function branchOrder(list) {
  return Array.prototype.slice.call(list.children).map((item) => Number(item.getAttribute("data-branch")));
}

/** Give the step's branches the priorities they had, in the new order `order` (old indices). */
function reorderBranches(stepIndex, order) {
  const cy = store.graph();
  const elements = store.current().elements;
  const edges = order.map((j) => cy.getElementById(elements["steps[" + stepIndex + "].branches[" + j + "]"]));
  if (edges.some((e) => e.empty())) return;
  const priorities = edges.map((e) => e.data("branch").priority).sort((a, b) => a - b);
  const distinct = priorities.every((p, i) => typeof p === "number" && (i === 0 || p !== priorities[i - 1]));
  store.change(edges.map((e, i) => {
    const branch = clone(e.data("branch"));
    branch.priority = distinct ? priorities[i] : i + 1;
    return { id: e.id(), data: { branch: branch } };
  }));
  const step = cy.getElementById(elements["steps[" + stepIndex + "]"]);
  if (step.nonempty() && store.openElementId() === step.id()) openPanel(step);
}

function moveInList(list, from, to) {
  const order = branchOrder(list);
  order.splice(to, 0, order.splice(from, 1)[0]);
  reorderBranches(Number(list.getAttribute("data-step")), order);
}

export function initBranchOrder() {
  const panel = document.getElementById("panel");
  panel.addEventListener("click", (evt) => {
    const move = evt.target.closest("[data-move]");
    if (!move) return;
    const li = move.closest("li");
    const list = li.parentElement;
    const i = Array.prototype.indexOf.call(list.children, li);
    const j = move.getAttribute("data-move") === "up" ? i - 1 : i + 1;
    if (j >= 0 && j < list.children.length) moveInList(list, i, j);
  });

  let dragged = null;
  panel.addEventListener("dragstart", (evt) => {
    const li = evt.target.closest && evt.target.closest(".branch-order li");
    if (!li) return;
    dragged = li;
    evt.dataTransfer.effectAllowed = "move";
    evt.dataTransfer.setData("text/plain", li.getAttribute("data-branch"));
    li.classList.add("dragging");
  });
  panel.addEventListener("dragover", (evt) => {
    if (dragged && evt.target.closest(".branch-order li")) evt.preventDefault();
  });
  panel.addEventListener("drop", (evt) => {
    const li = evt.target.closest(".branch-order li");
    if (!dragged || !li) return;
    evt.preventDefault();
    const list = li.parentElement;
    const from = Array.prototype.indexOf.call(list.children, dragged);
    const to = Array.prototype.indexOf.call(list.children, li);
    dragged = null;
    moveInList(list, from, to);
  });
  panel.addEventListener("dragend", () => {
    if (dragged) dragged.classList.remove("dragging");
    dragged = null;
  });
}
