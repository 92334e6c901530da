/*
 * toolbar.js: the editor's tool bar: add a step of a kind (from the palette), delete the
 * selection, undo, redo, zoom, fit, lay out, and Connect mode (drawing branches from anywhere
 * on a step).
 */
import { fit, placeTerminals, runLayout, selectElement, viewportCenter, zoomBy } from "./canvas.js";
import { setDrawMode } from "./connect.js";
import { clearPanel } from "./panels.js";
import { newStep } from "./recipe-graph.js";
import * as store from "./store.js";

/**
 * Add a step of `kind` at the model position `at` (where it was dropped), else right of the
 * selected step (or of all steps); select it and return it.
 */
export function addStep(kind, at) {
  const cy = store.graph();
  const selected = cy.nodes(":selected[kind = 'step']").first();
  let pos;
  if (at) {
    pos = { x: at.x, y: at.y };
  } else if (selected.nonempty()) {
    pos = { x: selected.position("x") + 240, y: selected.position("y") + 20 };
  } else {
    const steps = cy.nodes('[kind = "step"]');
    if (steps.length) {
      const bb = steps.boundingBox();
      pos = { x: bb.x2 + 240, y: (bb.y1 + bb.y2) / 2 };
    } else {
      pos = viewportCenter();
    }
  }
  const json = newStep(cy, store.metaCopy(), kind, pos);
  store.add([json]);
  const node = cy.getElementById(json.data.id);
  const box = node.boundingBox();
  const overlaps = cy.nodes('[kind = "terminal"]').some((t) => {
    const b = t.boundingBox();
    return b.x1 < box.x2 + 40 && b.x2 > box.x1 - 40 && b.y1 < box.y2 + 20 && b.y2 > box.y1 - 20;
  });
  // Terminals have no saved position: keep them clear of the steps.
  if (overlaps || cy.nodes('[kind = "step"]').length === 1) placeTerminals(cy);
  const ext = cy.extent();
  if (pos.x > ext.x2 - 100 || pos.x < ext.x1 || pos.y < ext.y1 || pos.y > ext.y2) {
    cy.fit(cy.elements(), 40);
    if (cy.zoom() > 1.2) cy.zoom({ level: 1.2, position: node.position() });
  }
  selectElement(node.id());
  return node;
}

/** Delete the selected steps and branches (undoably). */
export function deleteSelected() {
  const ids = store.graph().elements(":selected").filter('[kind = "step"], [kind = "branch"]').map((e) => e.id());
  if (!ids.length) return;
  store.setOpenElement(null);
  clearPanel("Deleted. Ctrl+Z brings it back.");
  store.remove(ids);
}

export function initToolbar() {
  const on = (id, handler) => document.getElementById(id).addEventListener("click", handler);
  on("btn-delete", deleteSelected);
  on("btn-undo", store.undo);
  on("btn-redo", store.redo);
  on("btn-fit", fit);
  on("btn-layout", runLayout);
  on("btn-zoom-in", () => zoomBy(1.25));
  on("btn-zoom-out", () => zoomBy(1 / 1.25));
  const connectButton = document.getElementById("btn-connect");
  connectButton.addEventListener("click", () => {
    const pressed = connectButton.getAttribute("aria-pressed") !== "true";
    setDrawMode(pressed);
    connectButton.setAttribute("aria-pressed", pressed ? "true" : "false");
  });
}
