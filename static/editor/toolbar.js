/*
 * toolbar.js: the editor's tool bar: add a step of a kind (from the palette), delete the
 * selection, undo, redo, zoom, fit, lay out, Connect mode (drawing branches from anywhere
 * on a step), and Publish… and Run…, which open the side panel's tab that does it.
 */
import { fit, placeTerminals, runLayout, selectElement, viewportCenter, zoomBy } from "./canvas.js";
import { setDrawMode } from "./connect.js";
import { settledEdits } from "./panel-edits.js";
import { clearPanel } from "./panels.js";
import { kindTakes } from "./catalog.js";
import { insertAfter, newStep, nodeLabel, reviewBranches } from "./recipe-graph.js";
import * as store from "./store.js";
import { showTab } from "./tabs.js";

// The actor a new step starts with when no alias of the recipe suits it ({model, reviewers}:
// {alias, reference}), as the server names the alias a picker would add.
let starterActors = {};

// How far right of a step the "+" places the next one, and how far down when that is taken.
const NEXT_STEP_GAP = { x: 300, y: 140 };

// The first place right of `node` (then below that) where no node is.
function placeAfter(cy, node) {
  const pos = { x: node.position("x") + NEXT_STEP_GAP.x, y: node.position("y") };
  const taken = (p) => cy.nodes().some((n) => Math.abs(n.position("x") - p.x) < 200 && Math.abs(n.position("y") - p.y) < 100);
  while (taken(pos)) pos.y += NEXT_STEP_GAP.y;
  return pos;
}

/**
 * Give the new step `json` the starter actor of its kind when it has no actor; return the
 * meta with the alias added, or undefined when nothing is added.
 */
function withStarterActor(json, meta) {
  const step = json.data.step;
  const starter = starterActors[step.kind === "human" ? "reviewers" : "model"];
  if (step.actor || !starter || !kindTakes(step.kind, "actor")) return undefined;
  const actors = meta.actors || {};
  if (starter.alias in actors && actors[starter.alias] !== starter.reference) return undefined;
  step.actor = starter.alias;
  json.data.label = nodeLabel(step);
  return Object.assign({}, meta, { actors: Object.assign({}, actors, { [starter.alias]: starter.reference }) });
}

/**
 * Add a step of `kind` at the model position `at` (where it was dropped), else right of the
 * step `after` and connected to it (its "+"), else right of the selected step (or of all
 * steps); in one undoable change; select it and return it.
 */
export function addStep(kind, at, after) {
  const cy = store.graph();
  const selected = cy.nodes(":selected[kind = 'step']").first();
  let pos;
  if (after) {
    pos = placeAfter(cy, after);
  } else if (at) {
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
  const meta = store.metaCopy();
  const json = newStep(cy, meta, kind, pos);
  const newMeta = withStarterActor(json, meta);
  const metaChange = newMeta === undefined ? [] : [{ id: "__meta__", data: { meta: newMeta } }];
  if (after) {
    const inserted = insertAfter(cy, after, json);
    store.addChanging(inserted.json, inserted.changes.concat(metaChange));
  } else {
    store.addChanging([json], metaChange);
  }
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

/** Add the branches a human step lacks for its options (approve, reject, revise), undoably. */
export function addReviewBranches(node) {
  const json = reviewBranches(node);
  if (json.length) store.add(json);
  return json.length;
}

/** Undo the last change once what a panel holds typed has applied: that edit is the last. */
export function undo() {
  return settledEdits().then(() => store.undo());
}

/** Redo, once the panels' edits are answered (an edit applied meanwhile ends what can be redone). */
export function redo() {
  return settledEdits().then(() => store.redo());
}

/** Delete the selected steps and branches (undoably). */
export function deleteSelected() {
  const ids = store.graph().elements(":selected").filter('[kind = "step"], [kind = "branch"]').map((e) => e.id());
  if (!ids.length) return;
  store.setOpenElement(null);
  clearPanel("Deleted. Ctrl+Z brings it back.");
  store.remove(ids);
}

export function initToolbar(config) {
  starterActors = config.starterActors || {};
  const on = (id, handler) => document.getElementById(id).addEventListener("click", handler);
  on("btn-delete", deleteSelected);
  on("btn-undo", undo);
  on("btn-redo", redo);
  on("btn-fit", fit);
  on("btn-layout", runLayout);
  on("btn-zoom-in", () => zoomBy(1.25));
  on("btn-zoom-out", () => zoomBy(1 / 1.25));
  // Publishing (with its note, errors and versions) stays in the Versions tab: this opens it.
  on("btn-publish", () => showTab("versions").then(() => {
    const note = document.querySelector("#panel-versions [name=note]");
    if (note) note.focus();
  }));
  // Run… is a link to the run page once a version is published; before, it opens the Test run tab.
  const run = document.getElementById("btn-run");
  if (run && run.tagName === "BUTTON") run.addEventListener("click", () => showTab("testrun"));
  const connectButton = document.getElementById("btn-connect");
  connectButton.addEventListener("click", () => {
    const pressed = connectButton.getAttribute("aria-pressed") !== "true";
    setDrawMode(pressed);
    connectButton.setAttribute("aria-pressed", pressed ? "true" : "false");
  });
}
