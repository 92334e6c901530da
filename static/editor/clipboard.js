/*
 * clipboard.js: copy, paste and duplicate steps with their branches.
 *
 * Copied steps are kept in this browser's localStorage, for the user who copied them (with the
 * actor aliases they name), so they paste into another tab or another recipe too; a pasted alias the recipe lacks is added
 * to it, one it has already keeps its own meaning. Pasting and duplicating are one undoable
 * edit each.
 */
import { selectElement } from "./canvas.js";
import { aliasesNamed, pastedElements, stepDocuments } from "./recipe-graph.js";
import * as store from "./store.js";

// One clipboard a user: another account signed in on this browser does not see it.
let storageKey = "branchline.clipboard";
const FORMAT = "branchline.steps/v1";
// A copy is placed this far below and right of its original (again, while that spot is taken).
const NUDGE = 40;

let kept = null; // the clipboard when storage refuses it (private mode, full)

function selectedSteps() {
  return store.graph().nodes(':selected[kind = "step"]');
}

function readClipboard() {
  try {
    const raw = window.localStorage.getItem(storageKey);
    const data = raw ? JSON.parse(raw) : kept;
    return data && data.format === FORMAT && Array.isArray(data.steps) && data.steps.length ? data : null;
  } catch (exc) {
    return kept;
  }
}

/** Tell whether there are copied steps to paste. */
export function canPaste() {
  return readClipboard() !== null;
}

/** Copy the selected steps with their branches; return how many were copied. */
export function copySelection() {
  const nodes = selectedSteps();
  if (nodes.empty()) return 0;
  const steps = stepDocuments(nodes);
  kept = { format: FORMAT, steps: steps, actors: aliasesNamed(steps, store.metaCopy().actors || {}) };
  try {
    window.localStorage.setItem(storageKey, JSON.stringify(kept));
  } catch (exc) {
    // Kept in this page only.
  }
  return steps.length;
}

// Move the copies until none lands on a step already there, so each paste is seen.
function freeOffset(steps) {
  const taken = store.graph().nodes('[kind = "step"]').map((n) => n.position());
  const landsOnOne = (dx, dy) => steps.some((s) => s.position && taken.some((p) =>
    Math.abs(p.x - s.position.x - dx) < NUDGE / 2 && Math.abs(p.y - s.position.y - dy) < NUDGE / 2));
  let n = 0;
  while (landsOnOne(n * NUDGE, n * NUDGE)) n += 1;
  return { x: n * NUDGE, y: n * NUDGE };
}

// Move the copies so that the middle of their box lands on `at`.
function offsetTo(steps, at) {
  const xs = steps.map((s) => (s.position ? s.position.x : 0));
  const ys = steps.map((s) => (s.position ? s.position.y : 0));
  return { x: at.x - (Math.min(...xs) + Math.max(...xs)) / 2, y: at.y - (Math.min(...ys) + Math.max(...ys)) / 2 };
}

function place(steps, actors, at) {
  const cy = store.graph();
  const json = pastedElements(cy, steps, at ? offsetTo(steps, at) : freeOffset(steps));
  const meta = store.metaCopy();
  const missing = Object.keys(actors || {}).filter((a) => !(meta.actors && a in meta.actors));
  if (missing.length) {
    meta.actors = Object.assign({}, meta.actors || {});
    missing.forEach((alias) => {
      meta.actors[alias] = actors[alias];
    });
    store.add(json, meta);
  } else {
    store.add(json);
  }
  const added = json.filter((j) => j.group === "nodes").map((j) => j.data.id);
  selectElement(added[0]);
  return added.length;
}

/** Paste the copied steps (at the model position `at`, else beside where they were); return how many. */
export function paste(at) {
  const data = readClipboard();
  return data ? place(data.steps, data.actors, at) : 0;
}

/** Put a copy of the selected steps beside them, leaving the clipboard as it was; return how many. */
export function duplicateSelection() {
  const nodes = selectedSteps();
  return nodes.empty() ? 0 : place(stepDocuments(nodes), {}, null);
}

export function initClipboard(config) {
  storageKey = "branchline.clipboard." + config.user;
}
