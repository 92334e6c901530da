/*
 * connect.js: drawing branches: drag from the handle shown on a hovered step (or from anywhere
 * on a step in Connect mode) to a step or a terminal; the new branch is added undoably.
 */
import { modelPosition, selectElement } from "./canvas.js";
import { newBranch } from "./recipe-graph.js";
import * as store from "./store.js";

let eh = null;

/** Turn Connect mode (drawing from anywhere on a step) on or off. */
export function setDrawMode(on) {
  if (on) eh.enableDrawMode();
  else eh.disableDrawMode();
}

export function initConnect() {
  const cy = store.graph();
  eh = cy.edgehandles({
    canConnect: (source, target) => {
      const kind = target.data("kind");
      return source.data("kind") === "step" && (kind === "step" || kind === "terminal");
    },
    edgeParams: () => ({ data: { kind: "preview" } }),
    hoverDelay: 60,
    snap: true,
    snapThreshold: 24,
    snapFrequency: 20,
    noEdgeEventsInDraw: true,
    disableBrowserGestures: true,
  });

  const handle = document.getElementById("eh-handle");
  let handleNode = null;
  let hideTimer = null;

  function showHandle(node) {
    clearTimeout(hideTimer);
    const bb = node.renderedBoundingBox({ includeLabels: false });
    handle.style.left = Math.round(bb.x2 - 8) + "px";
    handle.style.top = Math.round((bb.y1 + bb.y2) / 2 - 8) + "px";
    handle.hidden = false;
    handleNode = node;
  }

  function hideHandleSoon() {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(() => {
      handle.hidden = true;
    }, 400);
  }

  function startConnect(node) {
    handle.hidden = true;
    eh.start(node);
    const move = (evt) => eh.update(modelPosition(evt));
    const up = () => {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
      eh.stop();
    };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  }

  cy.on("mouseover", 'node[kind = "step"]', (evt) => {
    if (!eh.active) showHandle(evt.target);
  });
  cy.on("mouseout", 'node[kind = "step"]', hideHandleSoon);
  cy.on("pan zoom drag", () => {
    handle.hidden = true;
  });
  handle.addEventListener("mouseenter", () => clearTimeout(hideTimer));
  handle.addEventListener("mouseleave", hideHandleSoon);
  handle.addEventListener("mousedown", (evt) => {
    if (!handleNode || evt.button !== 0) return;
    evt.preventDefault();
    startConnect(handleNode);
  });

  cy.on("ehcomplete", (evt, source, target, added) => {
    added.remove();
    const json = newBranch(source, target);
    store.add([json]);
    selectElement(json.data.id);
  });
}
