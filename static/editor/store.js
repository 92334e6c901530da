/*
 * store.js: the editor's state, and its one owner.
 *
 * The recipe document is the canvas graph (steps and branches, in their elements' data) plus
 * `meta`, the document without its steps. Every change to it is an undoable action done here;
 * the store also keeps the element whose panel is open, the draft revision the server last
 * saved, and whether the document differs from what was saved. Other modules read the state
 * through these functions, change it only through them, and hear of changes by subscribing:
 *
 *   "change"  at once after an edit, an undo or a redo ({history: true} for the last two);
 *   "dirty"   when the dirty flag was worked out again ({dirty});
 *   "edited"  a moment after the last of a burst of edits, once the dirty flag follows it;
 *   "unapplied" when what a panel holds that is not applied yet changed ({fields}).
 *
 * What a panel holds that is not in the document yet (typed a moment ago, or not right) is
 * kept here too, by panel ("recipe" or the element id): its fields' labels and values, so the
 * panel opened again shows them, and nothing says "Saved" over them.
 */
import { clone, refreshElement, stableStringify, syncEdges, toDocument } from "./recipe-graph.js";

const EDIT_SETTLE_MS = 150;

let cy = null;
let ur = null;
let meta = {};
let savedJSON = null; // the document as saved (stable JSON); null until first needed
let revision = null;
let dirty = false;
let openElement = null;
let editTimer = null;
const unapplied = new Map(); // panel → {labels: [field label], values: its fields (panel-edits.js)}
const listeners = new Set();

/** Call `listener(event, detail)` on every event; return a function that stops it. */
export function subscribe(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function emit(event, detail) {
  listeners.forEach((listener) => listener(event, detail || {}));
}

// -- undoable actions (all by element id, so moved edges and re-added nodes stay valid) ------

function applyData(args) {
  const inverse = [];
  cy.batch(() => {
    args.changes.forEach((change) => {
      if (change.id === "__meta__") {
        inverse.push({ id: "__meta__", data: { meta: clone(meta) } });
        meta = clone(change.data.meta);
        return;
      }
      const ele = cy.getElementById(change.id);
      if (ele.empty()) return;
      const old = {};
      Object.keys(change.data).forEach((k) => {
        old[k] = clone(ele.data(k));
      });
      inverse.push({ id: change.id, data: old });
      Object.keys(change.data).forEach((k) => ele.data(k, clone(change.data[k])));
      refreshElement(ele);
    });
  });
  syncEdges(cy);
  return { changes: inverse.reverse() };
}

function addElements(args) {
  const json = args.json.map(clone);
  const adding = new Set(json.filter((j) => j.group === "nodes").map((j) => j.data.id));
  json.forEach((j) => {
    // An edge kept when it was taken away may lead to a placeholder of a missing step that is
    // gone now: it starts on its own step, and syncEdges draws the placeholder again.
    if (j.group === "edges" && !adding.has(j.data.target) && cy.getElementById(j.data.target).empty()) {
      j.data.target = j.data.source;
    }
  });
  cy.add(json);
  cy.batch(() => json.forEach((j) => refreshElement(cy.getElementById(j.data.id))));
  syncEdges(cy);
  return { ids: json.map((j) => j.data.id) };
}

function removeElements(args) {
  let eles = cy.collection();
  args.ids.forEach((id) => {
    eles = eles.union(cy.getElementById(id));
  });
  const nodes = eles.filter('[kind = "step"]');
  const edges = eles.filter('[kind = "branch"]');
  const touching = nodes.connectedEdges('[kind = "branch"]');
  const outgoing = touching.filter((e) => nodes.contains(e.source()));
  const incoming = touching.filter((e) => !nodes.contains(e.source()) && !edges.contains(e));
  const gone = nodes.union(outgoing).union(edges);
  const json = gone.nodes().map((e) => e.json()).concat(gone.edges().map((e) => e.json()));
  cy.batch(() => {
    // Branches of other steps that led to a removed step stay, pointing at a placeholder.
    incoming.forEach((e) => e.move({ target: e.source().id() }));
    gone.remove();
  });
  syncEdges(cy);
  return { json: json };
}

function setPositions(args) {
  cy.batch(() => {
    args.positions.forEach((p) => {
      const node = cy.getElementById(p.id);
      if (node.empty()) return;
      node.position(p.pos);
      if (node.data("kind") === "step") node.data("moved", p.moved);
    });
  });
  return { positions: args.before, before: args.positions };
}

/** Take charge of the document drawn in `graph` (a Cytoscape instance) and its `meta`. */
export function init(options) {
  cy = options.graph;
  meta = options.meta;
  revision = options.revision;
  ur = cy.undoRedo({ undoableDrag: false, isDebug: false });
  ur.action("apply-data", applyData, applyData);
  ur.action("add-elements", addElements, removeElements);
  ur.action("remove-elements", removeElements, addElements);
  ur.action("set-positions", setPositions, setPositions);
  // Writing the opened document out takes a while for a big recipe: it waits for a quiet
  // moment after the page is ready, or for the first edit, whichever comes first.
  const idle = window.requestIdleCallback || ((fn) => setTimeout(fn, 200));
  idle(keepOpenedDocument);
  cy.on("afterDo afterUndo afterRedo", (evt) => {
    emit("change", { history: evt.type !== "afterDo" });
    clearTimeout(editTimer);
    editTimer = setTimeout(() => {
      editTimer = null;
      checkDirty();
      emit("edited");
    }, EDIT_SETTLE_MS);
  });
}

/** Keep the document as opened as the saved one, before anything changes it. */
function keepOpenedDocument() {
  if (savedJSON === null) savedJSON = stableStringify(current().document);
}

// -- reading ---------------------------------------------------------------------------------

/** Return the Cytoscape instance: read it, or mark it up (classes); edit it through the store. */
export function graph() {
  return cy;
}

/** Return {document, paths, elements}: the document now, and its element ids ⇄ paths maps. */
export function current() {
  return toDocument(cy, meta);
}

/** Return a copy of the document's fields other than its steps. */
export function metaCopy() {
  return clone(meta);
}

export function getRevision() {
  return revision;
}

export function isDirty() {
  return dirty;
}

/** Return the id of the element whose panel is open, or null. */
export function openElementId() {
  return openElement;
}

/** Tell whether an edit was made that the dirty flag does not follow yet. */
export function editing() {
  return editTimer !== null;
}

// -- changing --------------------------------------------------------------------------------

/** Change elements' data (`{id, data}` each; id "__meta__" changes `meta`), undoably. */
export function change(changes) {
  keepOpenedDocument();
  ur.do("apply-data", { changes: changes });
}

/** Add elements (Cytoscape JSON), undoably; with `newMeta`, replace `meta` in the same step. */
export function add(json, newMeta) {
  keepOpenedDocument();
  if (newMeta === undefined) {
    ur.do("add-elements", { json: json });
    return;
  }
  ur.do("batch", [
    { name: "add-elements", param: { json: json } },
    { name: "apply-data", param: { changes: [{ id: "__meta__", data: { meta: newMeta } }] } },
  ]);
}

/** Add elements and change others' data (`{id, data}` each), in one undoable step. */
export function addChanging(json, changes) {
  keepOpenedDocument();
  if (!changes.length) {
    ur.do("add-elements", { json: json });
    return;
  }
  ur.do("batch", [
    { name: "add-elements", param: { json: json } },
    { name: "apply-data", param: { changes: changes } },
  ]);
}

/** Remove steps and branches by id, with the branches leaving removed steps, undoably. */
export function remove(ids) {
  keepOpenedDocument();
  ur.do("remove-elements", { ids: ids });
}

/** Move nodes to `positions` from `before` (`{id, pos, moved}` each), undoably. */
export function move(positions, before) {
  keepOpenedDocument();
  ur.do("set-positions", { positions: positions, before: before });
}

export function undo() {
  ur.undo();
}

export function redo() {
  ur.redo();
}

/** Work the dirty flag out now (not waiting for the edit to settle); return it. */
export function checkDirty() {
  keepOpenedDocument();
  dirty = stableStringify(current().document) !== savedJSON;
  emit("dirty", { dirty: dirty });
  return dirty;
}

/** Record that the server saved `document` as draft revision `newRevision`. */
export function markSaved(document, newRevision) {
  revision = newRevision;
  savedJSON = stableStringify(document);
}

/** Record which element's panel is open (null: none). */
export function setOpenElement(id) {
  openElement = id;
}

// -- edits a panel holds, not applied ----------------------------------------------------------

/** Record what the panel `key` holds that is not applied (null: nothing). */
export function setUnapplied(key, edits) {
  if (edits && edits.labels.length) unapplied.set(key, edits);
  else unapplied.delete(key);
  emit("unapplied", { fields: unappliedFields() });
}

/** Return what the panel `key` holds that is not applied: {labels, values}, or undefined. */
export function unappliedOf(key) {
  return unapplied.get(key);
}

/**
 * Return the labels of every field a panel holds that is not applied, in no panel order. The
 * edits of a deleted element do not count (they come back with it on undo).
 */
export function unappliedFields() {
  return Array.from(unapplied.entries())
    .filter(([key]) => key === "recipe" || cy.getElementById(key).nonempty())
    .flatMap(([, edits]) => edits.labels);
}
