/*
 * step-actions.js: the buttons under a step on the canvas (the hovered one, else the selected
 * one): "+" adds a connected next step of a kind picked in the palette; on a human step,
 * "Review branches" adds the approve / reject / revise branches it lacks, in one click. Both
 * are undoable, as every edit through the store is.
 */
import { selectElement } from "./canvas.js";
import { openPalette } from "./palette.js";
import { reviewBranches } from "./recipe-graph.js";
import * as store from "./store.js";
import { addReviewBranches } from "./toolbar.js";

const bar = document.getElementById("step-actions");
const addNext = document.getElementById("btn-add-next");
const review = document.getElementById("btn-review-branches");
// How long the buttons stay after the pointer leaves the step, to be reached.
const LINGER_MS = 500;
let hovered = null;
let shown = null;
let lingerTimer = null;

function target(cy) {
  if (hovered && hovered.inside()) return hovered;
  const selected = cy.nodes(':selected[kind = "step"]');
  return selected.length === 1 ? selected.first() : null;
}

/** Put the buttons under the step they act on, or hide them when there is none. */
function place() {
  const cy = store.graph();
  const node = target(cy);
  shown = node;
  if (!node) {
    bar.hidden = true;
    return;
  }
  const human = node.data("step").kind === "human";
  review.hidden = !human || reviewBranches(node).length === 0;
  const bb = node.renderedBoundingBox({ includeLabels: false });
  const name = node.data("step").name || node.data("key");
  addNext.setAttribute("aria-label", "Add a step after " + name);
  review.setAttribute("aria-label", "Add approve, reject and revise branches to " + name);
  bar.hidden = false;
  bar.style.left = Math.round(bb.x1) + "px";
  bar.style.top = Math.round(bb.y2 + 4) + "px";
}

export function initStepActions() {
  const cy = store.graph();
  cy.on("mouseover", 'node[kind = "step"]', (evt) => {
    clearTimeout(lingerTimer);
    hovered = evt.target;
    place();
  });
  cy.on("mouseout", 'node[kind = "step"]', () => {
    clearTimeout(lingerTimer);
    lingerTimer = setTimeout(() => {
      hovered = null;
      place();
    }, LINGER_MS);
  });
  bar.addEventListener("mouseenter", () => clearTimeout(lingerTimer));
  // Once a frame at most: a layout moves a thousand steps, one event each.
  let frame = 0;
  const placeSoon = () => {
    if (!frame) frame = requestAnimationFrame(() => {
      frame = 0;
      place();
    });
  };
  cy.on("select unselect remove add position viewport", placeSoon);
  store.subscribe((event) => {
    if (event === "change") placeSoon();
  });
  addNext.addEventListener("click", () => {
    if (shown) openPalette(shown);
  });
  review.addEventListener("click", () => {
    if (!shown) return;
    const node = shown;
    addReviewBranches(node);
    selectElement(node.id());
  });
}
