/*
 * panels.js: the Properties panel: the step or branch form of the selected element. The forms
 * are htmx partials that post the current document with their fields; they apply as the
 * author types (panel-edits.js), each answer's edited piece of the document put on the canvas
 * as one undoable change. The Recipe tab's form applies the same way.
 */
import { flush, edited, initPanelEdits, pending as editsPending, restore } from "./panel-edits.js";
import { clone, stableStringify, stepNodes } from "./recipe-graph.js";
import { initSources } from "./sources.js";
import { initTools } from "./tools.js";
import * as store from "./store.js";
import { showTab } from "./tabs.js";

const panel = document.getElementById("panel");
let urls = {};

function indices(path) {
  const found = /^steps\[(\d+)\](?:\.branches\[(\d+)\])?$/.exec(path || "");
  return found ? { step: found[1], branch: found[2] } : null;
}

/** Show a message in place of a form. */
export function clearPanel(message) {
  panel.innerHTML = '<p class="muted">' + message + "</p>";
}

/** Open the form of the step or branch `ele` in the Properties panel. */
export function openPanel(ele) {
  const current = store.current();
  const where = indices(current.paths[ele.id()]);
  if (!where) return undefined;
  showTab("properties", false);
  store.setOpenElement(ele.id());
  flush(); // the panel left applies what was typed in it
  const values = { document: JSON.stringify(current.document), step: where.step, element: ele.id() };
  if (where.branch !== undefined) values.branch = where.branch;
  return htmx.ajax("POST", where.branch !== undefined ? urls.branchPanel : urls.stepPanel, {
    source: "#panel", target: "#panel", swap: "innerHTML", values: values,
  });
}

function reopenPanel() {
  const id = store.openElementId();
  if (!id) return undefined;
  const ele = store.graph().getElementById(id);
  if (ele.empty()) {
    store.setOpenElement(null);
    clearPanel("Select a step or a branch to edit it.");
    return undefined;
  }
  return openPanel(ele);
}

function stepChanges(node, result) {
  const cy = store.graph();
  const step = result.step;
  const oldKey = node.data("key");
  const changes = [{ id: node.id(), data: { step: step, key: step.key } }];
  if (oldKey !== step.key) {
    cy.edges('[kind = "branch"]').forEach((e) => {
      const branch = e.data("branch");
      if (branch.target === oldKey) changes.push({ id: e.id(), data: { branch: Object.assign(clone(branch), { target: step.key }) } });
    });
    cy.nodes('[kind = "step"]').forEach((n) => {
      if (n.same(node)) return;
      const other = n.data("step");
      if (!other.leaf_targets) return;
      const targets = clone(other.leaf_targets);
      let renamed = false;
      Object.keys(targets).forEach((leaf) => {
        if (targets[leaf] === oldKey) {
          targets[leaf] = step.key;
          renamed = true;
        }
      });
      if (renamed) changes.push({ id: n.id(), data: { step: Object.assign(clone(other), { leaf_targets: targets }) } });
    });
  }
  const order = stepNodes(cy).map((n) => n.id());
  const from = order.indexOf(node.id());
  const to = Math.max(0, Math.min(order.length - 1, (result.sequence || from + 1) - 1));
  if (from !== to) {
    order.splice(to, 0, order.splice(from, 1)[0]);
    order.forEach((id, i) => {
      if (cy.getElementById(id).data("order") !== i) changes.push({ id: id, data: { order: i } });
    });
  }
  return changes.concat(metaChanges(result));
}

// The aliases a picker added and the inputs a fix declared go into the document with the edit.
function metaChanges(result) {
  const meta = store.metaCopy();
  let changed = false;
  ["actors", "inputs"].forEach((key) => {
    if (!result[key] || !Object.keys(result[key]).length) return;
    meta[key] = Object.assign({}, meta[key] || {}, result[key]);
    changed = true;
  });
  return changed ? [{ id: "__meta__", data: { meta: meta } }] : [];
}

// An answer that changes nothing (the same values applied again) is no undo step.
function changing(changes) {
  const cy = store.graph();
  return changes.filter((c) => {
    const now = c.id === "__meta__" ? { meta: store.metaCopy() } : cy.getElementById(c.id).data();
    return Object.keys(c.data).some((k) => stableStringify(now[k]) !== stableStringify(c.data[k]));
  });
}

function applyResult(target, result) {
  let changes = [];
  if (target.id === "panel-recipe") {
    const meta = Object.assign(store.metaCopy(), result);
    // A setting cleared in the form (the budget) comes back as null: the document drops it.
    Object.keys(result).forEach((key) => { if (result[key] === null) delete meta[key]; });
    changes = [{ id: "__meta__", data: { meta: meta } }];
  } else {
    const ele = store.graph().getElementById(result.element);
    if (ele.empty()) return;
    if (result.branch) changes = [{ id: ele.id(), data: { branch: result.branch } }].concat(metaChanges(result));
    else if (result.step) changes = stepChanges(ele, result);
  }
  changes = changing(changes);
  if (changes.length) store.change(changes);
}

function applyAnswer(form, result) {
  applyResult(form.closest("#panel-recipe") || panel, result);
  const title = form.querySelector(".panel-title code");
  if (title && result.step) title.textContent = result.step.key;
}

/** Return where the form's element is now ({document, step, branch}), or null if deleted. */
function placeOf(form) {
  const current = store.current();
  const values = { document: JSON.stringify(current.document) };
  const elementInput = form.querySelector('[name="element"]');
  if (!elementInput || !elementInput.value) return values;
  const where = indices(current.paths[elementInput.value]);
  if (!where) {
    if (form.closest("#panel")) clearPanel("That element was deleted.");
    return null;
  }
  values.step = where.step;
  if (where.branch !== undefined) values.branch = where.branch;
  return values;
}

// Drawn again from the document (a new alias or input shows in its menus), focus kept.
function redraw(form) {
  const focused = document.activeElement && form.contains(document.activeElement) ? document.activeElement.name : null;
  const done = form.getAttribute("data-editor-form") === "recipe" ? showTab("recipe", true) : reopenPanel();
  Promise.resolve(done).then(() => {
    const drawn = document.querySelector(form.getAttribute("data-editor-form") === "recipe" ? "#panel-recipe [data-editor-form]" : "#panel [data-editor-form]");
    if (!drawn) return;
    restore(drawn, true);
    const field = focused && drawn.querySelector('[name="' + CSS.escape(focused) + '"]');
    if (field) field.focus();
  });
}

/** Tell whether a panel edit waits to be applied or is being applied. */
export function panelPending() {
  return editsPending();
}

// The step form shows the settings of its kind only.
function setupPanel() {
  const form = panel.querySelector('[data-editor-form="step"]');
  if (!form) return;
  const kind = form.querySelector('[name="kind"]');
  if (kind) {
    const showKind = () => {
      form.querySelectorAll("[data-kind-only]").forEach((el) => {
        el.hidden = el.getAttribute("data-kind-only").split(" ").indexOf(kind.value) < 0;
      });
    };
    kind.addEventListener("change", showKind);
    showKind();
  }
}

// Condition builder buttons and type changes re-render the branch form with what was typed.
function refreshBranchForm(form, op) {
  htmx.ajax("POST", urls.branchPanel, { source: form, target: "#panel", swap: "innerHTML", values: { _op: op } });
}

// The step form's builders (decision tree, routes) re-render alone, from what was typed, when a
// builder button is pressed or a node's kind or a condition's type changes.
function refreshBuilder(form, op) {
  const target = op.indexOf("rt-") === 0 ? "#routes-builder" : "#tree-builder";
  htmx.ajax("POST", urls.stepPanel, { source: form, target: target, swap: "innerHTML", values: { _op: op } });
}

function insertName(chip) {
  const textarea = panel.querySelector('[name="prompt"]');
  const insert = "{" + chip.getAttribute("data-insert") + "}";
  const start = textarea.selectionStart || 0;
  const end = textarea.selectionEnd || 0;
  textarea.value = textarea.value.slice(0, start) + insert + textarea.value.slice(end);
  textarea.focus();
  textarea.selectionStart = textarea.selectionEnd = start + insert.length;
  textarea.dispatchEvent(new Event("input", { bubbles: true }));
}

export function initPanels(config) {
  urls = config.urls;
  initSources(panel);
  initTools(panel, urls);
  initPanelEdits({ place: placeOf, apply: applyAnswer, reopen: redraw });
  store.graph().on("select", "node, edge", (evt) => {
    const kind = evt.target.data("kind");
    if (kind === "step" || kind === "branch") openPanel(evt.target);
  });
  store.subscribe((event, detail) => {
    if (event === "change" && detail.history) reopenPanel();
  });

  // Panel requests carry the current document and the current place of the edited element.
  document.body.addEventListener("htmx:configRequest", (evt) => {
    const elt = evt.detail.elt;
    const form = elt && elt.closest ? elt.closest("[data-editor-form]") : null;
    if (!form) return;
    const current = store.current();
    evt.detail.parameters.document = JSON.stringify(current.document);
    const elementInput = form.querySelector('[name="element"]');
    if (!elementInput || !elementInput.value) return;
    const where = indices(current.paths[elementInput.value]);
    if (!where) {
      evt.preventDefault();
      clearPanel("That element was deleted.");
      return;
    }
    evt.detail.parameters.step = where.step;
    if (where.branch !== undefined) evt.detail.parameters.branch = where.branch;
  });

  document.body.addEventListener("htmx:afterSwap", (evt) => {
    const target = evt.detail.target;
    if (!target) return;
    if (target.id === "panel") setupPanel();
    const form = target.querySelector("[data-editor-form]") || target.closest("[data-editor-form]");
    if (!form) return;
    // A builder drawn again from what was typed, or the branch form after a type change: the
    // edit applies. A panel opened: what it held unapplied is put back.
    const whole = target.id === "panel" || target.id === "panel-recipe";
    const op = evt.detail.requestConfig?.parameters?._op;
    if (target.id === "tree-builder" || target.id === "routes-builder" || (whole && op)) edited(form, null);
    else if (whole) restore(form);
  });

  document.body.addEventListener("htmx:responseError", (evt) => {
    const target = evt.detail.target;
    if (!target || !(target.id === "panel" || target.closest("#panel"))) return;
    const p = document.createElement("p");
    p.className = "field-error";
    p.setAttribute("role", "alert");
    const xhr = evt.detail.xhr;
    p.textContent = xhr.status === 403 ? "You may not change this recipe." : (xhr.responseText || "The server could not answer.").slice(0, 300);
    panel.prepend(p);
  });

  panel.addEventListener("change", (evt) => {
    const refresh = evt.target.getAttribute("data-refresh");
    if (!refresh) return;
    const stepForm = evt.target.closest('[data-editor-form="step"]');
    if (stepForm) {
      refreshBuilder(stepForm, refresh);
      return;
    }
    const form = evt.target.closest('[data-editor-form="branch"]');
    if (form) refreshBranchForm(form, "refresh");
  });
  panel.addEventListener("click", (evt) => {
    const opButton = evt.target.closest("[data-op]");
    if (opButton) {
      const stepForm = opButton.closest('[data-editor-form="step"]');
      if (stepForm) refreshBuilder(stepForm, opButton.getAttribute("data-op"));
      else refreshBranchForm(opButton.closest("form"), opButton.getAttribute("data-op"));
      return;
    }
    const fill = evt.target.closest("[data-fill-field]");
    if (fill) {
      // A suggested value: fills the field, which applies as typing would (Undo takes it back).
      const input = fill.form?.elements.namedItem(fill.getAttribute("data-fill-field"));
      if (input) {
        input.value = fill.getAttribute("data-fill-value");
        input.dispatchEvent(new Event("input", { bubbles: true }));
        input.focus();
      }
      return;
    }
    const chip = evt.target.closest("[data-insert]");
    if (chip) insertName(chip);
  });
}
