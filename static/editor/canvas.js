/*
 * canvas.js: the Cytoscape canvas: drawing the document on open (laid out when steps have no
 * saved position), dragging and laying out steps (undoably, through the store), finding and
 * showing elements (moving the view only for one off screen), zooming and a readable fit, branch
 * labels that would pile up shown on hover, the navigator kept clear of the steps, and the
 * tooltip of a branch.
 */
import { canvasStyle, LAYOUT, LAYOUT_STYLE, MAX_FIT_ZOOM, MIN_FIT_ZOOM, onColourSchemeChange, WHOLE_FIT_ZOOM } from "./canvas-style.js";
import { summarize } from "./catalog.js";
import { layOutOnOpen } from "./layout.js";
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

const FIT_PADDING = 30;
// A graph with more elements than this is big: drawn with shortcuts, measured in view only.
const BIG = 300;
// True while fitReadable moves the view, so that a move by anything else is known (initNavigator).
let fitting = false;

/**
 * Return the box of the nodes from their positions and sizes alone. Cytoscape's own measures
 * every label (and edge) of the graph first, which for a big graph costs more than the rest of
 * opening it; its labels barely reach past its steps, and it is shown from its start anyway.
 */
function nodesBox(cy) {
  const box = { x1: Infinity, y1: Infinity, x2: -Infinity, y2: -Infinity };
  cy.nodes().forEach((n) => {
    const p = n.position();
    const w = n.outerWidth() / 2;
    const h = n.outerHeight() / 2;
    box.x1 = Math.min(box.x1, p.x - w);
    box.y1 = Math.min(box.y1, p.y - h);
    box.x2 = Math.max(box.x2, p.x + w);
    box.y2 = Math.max(box.y2, p.y + h);
  });
  return Object.assign(box, { w: box.x2 - box.x1, h: box.y2 - box.y1 });
}

/**
 * Fit the whole graph in the view, at most at MAX_FIT_ZOOM; readable from MIN_FIT_ZOOM, and
 * still whole down to WHOLE_FIT_ZOOM (a narrow window) rather than cut off. A graph too big
 * even for that is shown from its start (left, and top when it is also too tall) at
 * MIN_FIT_ZOOM rather than shrunk to unreadable text; the navigator shows the rest.
 */
export function fitReadable(cy) {
  const eles = cy.elements();
  const w = cy.width();
  const h = cy.height();
  if (eles.empty() || !w || !h) return;
  const bb = eles.length > BIG ? nodesBox(cy) : eles.boundingBox();
  const room = { w: w - 2 * FIT_PADDING, h: h - 2 * FIT_PADDING };
  const whole = Math.min(MAX_FIT_ZOOM, room.w / bb.w, room.h / bb.h);
  const zoom = whole >= WHOLE_FIT_ZOOM ? whole : MIN_FIT_ZOOM;
  const place = (size, start, span) => (size * zoom <= span ? (span + 2 * FIT_PADDING - size * zoom) / 2 : FIT_PADDING) - start * zoom;
  fitting = true;
  try {
    cy.viewport({ zoom: zoom, pan: { x: place(bb.w, bb.x1, room.w), y: place(bb.h, bb.y1, room.h) } });
  } finally {
    fitting = false;
  }
}

/** Return whether `ele` is wholly inside the view. */
function onScreen(cy, ele) {
  const b = ele.renderedBoundingBox({ includeLabels: false, includeOverlays: false });
  return b.x1 >= 0 && b.y1 >= 0 && b.x2 <= cy.width() && b.y2 <= cy.height();
}

function showHint(cy) {
  document.getElementById("canvas-hint").hidden = cy.nodes('[kind = "step"]').length > 0;
}

// Settles once the graph drawn on open is placed (at once, unless it is being laid out).
let placement = Promise.resolve("saved");

/** Return a promise that settles once the graph drawn on open has its positions. */
export function placed() {
  return placement;
}

/**
 * Draw `built` (from `toElements`) on the page's canvas and return the Cytoscape instance.
 * Steps without any saved position are laid out off the main thread (or from the layout cache):
 * the canvas stays hidden until `placed()` settles.
 */
export function createCanvas(built) {
  const big = built.elements.length > BIG;
  const cy = cytoscape({
    container: container,
    elements: built.elements,
    style: canvasStyle(),
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
  onColourSchemeChange((scheme) => cy.style(canvasStyle(scheme)));
  cy.edges('[kind = "branch"]').forEach((e) => {
    if (e.data("branch").active === false) e.addClass("inactive");
  });
  syncEdges(cy);
  if (built.needsLayout && built.positionedCount === 0) {
    container.style.visibility = "hidden";
    placement = layOutOnOpen(cy, LAYOUT_STYLE, LAYOUT).then((source) => {
      container.style.visibility = "";
      fitReadable(cy);
      performance.mark("editor-laid-out");
      return source;
    });
    showHint(cy);
    return cy;
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
  }
  fitReadable(cy);
  performance.mark("editor-laid-out");
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
  // The view stays where the author put it unless the element is (partly) off screen: then it
  // is centred, zoomed in only as far as it takes to read it.
  if (onScreen(cy, ele)) return true;
  if (cy.zoom() < MIN_FIT_ZOOM) cy.zoom(MIN_FIT_ZOOM);
  cy.center(ele);
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
  fitReadable(store.graph());
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

// Past this many branches, labels are spread only among those in and near the view (again
// as the view moves): measuring thousands of labels would hold up opening the recipe.
const ALL_UP_TO = 400;

function labelBox(edge) {
  return edge.boundingBox({ includeNodes: false, includeEdges: false, includeLabels: true, includeOverlays: false });
}

function boxesMeet(a, b) {
  return a.w > 0 && b.w > 0 && a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;
}

// The labelled branches to spread: all of them, or those with an end in (or near) the view.
function labelledEdges(cy) {
  const edges = cy.edges().filter((e) => !!e.data("label"));
  if (edges.length <= ALL_UP_TO) return edges;
  const ext = cy.extent();
  const margin = Math.max(ext.w, ext.h) / 2;
  const near = (n) => {
    const p = n.position();
    return p.x > ext.x1 - margin && p.x < ext.x2 + margin && p.y > ext.y1 - margin && p.y < ext.y2 + margin;
  };
  return edges.filter((e) => near(e.source()) || near(e.target()));
}

/**
 * Keep branch labels from piling up: a label that would overlap one drawn before it (branches
 * in step order, then priority), or any node (it would be drawn under it), is
 * hidden and shown on hover, where the tooltip also names it. Parallel branches are fanned out
 * by the style; this catches what fanning out cannot.
 */
export function spreadEdgeLabels(cy) {
  const edges = labelledEdges(cy).sort((a, b) =>
    (a.source().data("order") || 0) - (b.source().data("order") || 0) || ((a.data("branch") || {}).priority || 0) - ((b.data("branch") || {}).priority || 0));
  edges.removeClass("label-crowded");
  const all = cy.edges().length <= ALL_UP_TO;
  const nodes = (all ? cy.nodes() : edges.connectedNodes()).map((n) => ({ node: n, box: n.boundingBox({ includeLabels: false, includeOverlays: false }) }));
  // Nodes are drawn over edges: a label meeting any node, its own ends too, would be cut.
  const underNode = (box) => nodes.some((n) => boxesMeet(n.box, box));
  const drawn = [];
  edges.forEach((edge) => {
    const box = labelBox(edge);
    if (drawn.some((b) => boxesMeet(b, box)) || underNode(box)) edge.addClass("label-crowded");
    else drawn.push(box);
  });
}

function followLabels(cy) {
  let timer = null;
  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(() => spreadEdgeLabels(cy), 120);
  };
  const big = cy.edges().length > ALL_UP_TO;
  cy.on("add remove data position", later);
  if (big) cy.on("viewport", later); // the view decides which are spread
  cy.on("mouseover", "edge", (evt) => evt.target.addClass("hovered"));
  cy.on("mouseout", "edge", (evt) => evt.target.removeClass("hovered"));
  // Once the steps have their places (a layout on open may still be running); a big graph's
  // after it is first drawn.
  placement.then(() => (big ? later() : spreadEdgeLabels(cy)));
}

const NAV_MARGIN = 8;
const CORNERS = ["br", "bl", "tr", "tl"];

/**
 * Put the navigator in the first corner of the canvas where it covers no node (bottom right
 * first), or hide it while every corner has one: it is a map, never a lid on the graph.
 */
export function placeNavigator(cy) {
  const nav = document.getElementById("cy-nav");
  if (!nav) return;
  const w = nav.offsetWidth;
  const h = nav.offsetHeight;
  const cw = cy.width();
  const ch = cy.height();
  const boxes = cy.nodes().map((n) => n.renderedBoundingBox());
  const rect = (corner) => {
    const x1 = corner[1] === "r" ? cw - NAV_MARGIN - w : NAV_MARGIN;
    const y1 = corner[0] === "b" ? ch - NAV_MARGIN - h : NAV_MARGIN;
    return { x1: x1, y1: y1, x2: x1 + w, y2: y1 + h, w: w };
  };
  const free = CORNERS.find((corner) => !boxes.some((b) => boxesMeet(Object.assign({ w: 1 }, b), rect(corner))));
  nav.dataset.corner = free || "none";
  delete nav.dataset.pending;
}

/** Start the navigator (cytoscape-navigator) and keep it clear of the nodes as the view moves. */
export function initNavigator(cy) {
  if (cy.navigator) cy.navigator({ container: "#cy-nav", viewLiveFramerate: 0, rerenderDelay: 400 });
  const nav = document.getElementById("cy-nav");
  let timer = null;
  cy.on("viewport add remove position resize", () => {
    // Tests wait for the navigator's corner to be current: no placement pending.
    if (nav) nav.dataset.pending = "1";
    clearTimeout(timer);
    timer = setTimeout(() => placeNavigator(cy), 100);
  });
  // The canvas changes size without a window resize (the problems panel grows as lint answers):
  // until the author moves the view, picks something or opens a menu, the initial fit follows
  // it. A refit after that would move the steps from under the pointer and close the menu.
  let untouched = true;
  cy.on("viewport", () => {
    if (!fitting) untouched = false;
  });
  cy.one("select tapstart cxttapstart", () => {
    untouched = false;
  });
  if (window.ResizeObserver) {
    new ResizeObserver(() => {
      cy.resize();
      if (untouched) fitReadable(cy);
    }).observe(container);
  }
  placeNavigator(cy);
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
    } else if (edge.data("kind") === "sequence") {
      text = edge.target().data("kind") === "terminal"
        ? "When no branch is taken, the run finishes here (Complete)."
        : "When no branch is taken, the run goes on to the next step in order.";
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
  followLabels(cy);
  store.subscribe((event) => {
    if (event === "change") showHint(cy);
  });
}
