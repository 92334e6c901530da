/*
 * canvas.js: the Cytoscape canvas: drawing the document on open (laid out when steps have no
 * saved position), dragging and laying out steps (undoably, through the store), finding and
 * showing elements, zooming, and the tooltip of a branch.
 */
import { LAYOUT, STYLE } from "./canvas-style.js";
import { summarize } from "./catalog.js";
import { branchEdges, COMPLETE_ID, END_ID, syncEdges } from "./recipe-graph.js";
import * as store from "./store.js";

const container = document.getElementById("cy");

/** Keep the terminals above and below the right end of the steps, clear of them. */
export function placeTerminals(cy) {
  const steps = cy.nodes('[kind = "step"]');
  if (!steps.length) {
    cy.getElementById(END_ID).position({ x: 300, y: 120 });
    cy.getElementById(COMPLETE_ID).position({ x: 300, y: 240 });
    return;
  }
  // Above and below the right end of the steps, so edges to them do not run through steps.
  const bb = steps.boundingBox();
  cy.getElementById(END_ID).position({ x: bb.x2 + 160, y: bb.y1 - 90 });
  cy.getElementById(COMPLETE_ID).position({ x: bb.x2 + 160, y: bb.y2 + 90 });
}

function placeMissing(cy) {
  cy.nodes('[kind = "missing"]').forEach((n) => {
    const source = n.incomers("node").first();
    if (source.nonempty()) n.position({ x: source.position("x") + 220, y: source.position("y") + 90 });
  });
}

function zoomAround(cy, level) {
  cy.zoom({ level: level, renderedPosition: { x: container.clientWidth / 2, y: container.clientHeight / 2 } });
}

function showHint(cy) {
  document.getElementById("canvas-hint").hidden = cy.nodes('[kind = "step"]').length > 0;
}

/** Draw `built` (from `toElements`) on the page's canvas, placed; return the Cytoscape instance. */
export function createCanvas(built) {
  const big = built.elements.length > 300;
  const cy = cytoscape({
    container: container,
    elements: built.elements,
    style: STYLE,
    layout: { name: "preset", fit: false },
    minZoom: 0.05,
    maxZoom: 3,
    wheelSensitivity: 0.25,
    boxSelectionEnabled: true,
    selectionType: "single",
    textureOnViewport: big,
    hideEdgesOnViewport: big,
    motionBlur: false,
  });
  cy.edges('[kind = "branch"]').forEach((e) => {
    if (e.data("branch").active === false) e.addClass("inactive");
  });
  syncEdges(cy);
  if (built.needsLayout && built.positionedCount === 0) {
    cy.layout(LAYOUT).run();
  } else {
    if (built.needsLayout) {
      // Some steps have no position: put them in a column right of the others.
      const bb = cy.nodes('[kind = "step"]').filter((n) => n.data("origPosition")).boundingBox();
      cy.nodes('[kind = "step"]').filter((n) => !n.data("origPosition")).forEach((n, i) => {
        n.position({ x: bb.x2 + 260, y: bb.y1 + i * 90 });
      });
    }
    placeTerminals(cy);
    placeMissing(cy);
    cy.fit(undefined, 30);
  }
  if (cy.zoom() > 1.2) zoomAround(cy, 1.2);
  showHint(cy);
  return cy;
}

function positionsSnapshot(nodes, moved) {
  return nodes.map((n) => ({
    id: n.id(),
    pos: { x: n.position("x"), y: n.position("y") },
    moved: moved === undefined ? !!n.data("moved") : moved,
  }));
}

/** Lay the steps out left to right, undoably. */
export function runLayout() {
  const cy = store.graph();
  const nodes = cy.nodes();
  const before = positionsSnapshot(nodes);
  cy.layout(LAYOUT).run();
  const after = positionsSnapshot(nodes).map((p) => Object.assign(p, { moved: cy.getElementById(p.id).data("kind") === "step" }));
  store.move(after, before);
}

/** Select the element `id` and bring it into view; return whether it exists. */
export function selectElement(id) {
  const cy = store.graph();
  const ele = cy.getElementById(id);
  if (ele.empty()) return false;
  cy.elements().unselect();
  ele.select();
  const pos = ele.isNode() ? ele.position() : ele.midpoint();
  if (cy.zoom() < 0.6) cy.zoom({ level: 0.8, position: pos });
  const ext = cy.extent();
  if (pos.x < ext.x1 || pos.x > ext.x2 || pos.y < ext.y1 || pos.y > ext.y2) cy.center(ele);
  return true;
}

export function nodeByKey(key) {
  return store.graph().nodes('[kind = "step"]').filter((n) => n.data("key") === key).first();
}

/** Return the edge of the branch `name` of the step `stepKey`, or null. */
export function edgeByName(stepKey, name) {
  const node = nodeByKey(stepKey);
  if (node.empty()) return null;
  const edge = branchEdges(node).filter((e) => e.data("branch").name === name).first();
  return edge.nonempty() ? edge : null;
}

export function zoomBy(factor) {
  const cy = store.graph();
  zoomAround(cy, cy.zoom() * factor);
}

export function fit() {
  store.graph().fit(undefined, 30);
}

/** Return the model position of the middle of the view. */
export function viewportCenter() {
  const ext = store.graph().extent();
  return { x: (ext.x1 + ext.x2) / 2, y: (ext.y1 + ext.y2) / 2 };
}

/** Return the model position of a mouse event on the page. */
export function modelPosition(evt) {
  const cy = store.graph();
  const rect = container.getBoundingClientRect();
  const pan = cy.pan();
  const zoom = cy.zoom();
  return { x: (evt.clientX - rect.left - pan.x) / zoom, y: (evt.clientY - rect.top - pan.y) / zoom };
}

// Dragging nodes: one undoable step per drag.
function followDrags(cy) {
  let dragStart = null;
  cy.on("grab", "node", () => {
    if (!dragStart) dragStart = positionsSnapshot(cy.nodes());
  });
  cy.on("free", "node", () => {
    if (!dragStart) return;
    const before = dragStart;
    dragStart = null;
    const byId = {};
    before.forEach((p) => {
      byId[p.id] = p;
    });
    const changed = cy.nodes().filter((n) => {
      const p = byId[n.id()];
      return p && (p.pos.x !== n.position("x") || p.pos.y !== n.position("y"));
    });
    if (!changed.length) return;
    const after = positionsSnapshot(changed, true).map((p) => (cy.getElementById(p.id).data("kind") === "step" ? p : Object.assign(p, { moved: false })));
    store.move(after, changed.map((n) => byId[n.id()]));
  });
}

// Tooltips: a branch's name, or why a test run did not take it.
function showTips(cy) {
  const tip = document.getElementById("edge-tip");
  cy.on("mouseover", "edge", (evt) => {
    const edge = evt.target;
    let text;
    if (edge.data("kind") === "branch") {
      const b = edge.data("branch");
      text = b.name + " (priority " + b.priority + "): " + summarize(b.when) + " → " + b.action + (b.target ? " " + b.target : "");
      if (edge.data("runReason")) text += "\n" + edge.data("runReason");
    } else if (edge.data("kind") === "leaf") {
      text = edge.data("label");
    } else {
      return;
    }
    tip.textContent = text;
    const p = evt.renderedPosition || edge.renderedMidpoint();
    tip.hidden = false;
    // Keep the tip inside the canvas: left of the pointer near the right edge.
    let left = p.x + 12;
    if (left + tip.offsetWidth > container.clientWidth - 4) left = Math.max(4, p.x - 12 - tip.offsetWidth);
    let top = p.y + 12;
    if (top + tip.offsetHeight > container.clientHeight - 4) top = Math.max(4, p.y - 12 - tip.offsetHeight);
    tip.style.left = Math.round(left) + "px";
    tip.style.top = Math.round(top) + "px";
  });
  cy.on("mouseout", "edge", () => {
    tip.hidden = true;
  });
}

/** Follow drags and hovers on the store's graph, and keep the empty-canvas hint current. */
export function initCanvas() {
  const cy = store.graph();
  followDrags(cy);
  showTips(cy);
  store.subscribe((event) => {
    if (event === "change") showHint(cy);
  });
}
