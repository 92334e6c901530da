/*
 * panel-edits.js: the side panels' forms apply as the author types. A moment after the last
 * keystroke (or at once, on Enter, a fix, or leaving the panel) the form is posted with
 * `apply=1`; the server answers with what applies (one undoable change) and what is not right,
 * by field, with the one-click fixes that make it right. Errors are shown beside their fields;
 * what a form holds that is not applied is kept in the store, so the panel opened again shows
 * it, and the save state never says "Saved" over it.
 */
import * as store from "./store.js";

// The pause after the last keystroke that makes a burst of typing one change.
const APPLY_DELAY_MS = 500;
const csrfToken = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];

let hooks = null; // {place(form), apply(form, result), reopen(form)}: panels.js
let timer = null;
let waiting = null; // the form whose edits wait for the timer
let sending = null; // the request in flight
let queued = null; // a form edited while a request was in flight

/** Return the panel a form edits: "recipe", or its element's id. */
function panelKey(form) {
  if (form.getAttribute("data-editor-form") === "recipe") return "recipe";
  const element = form.querySelector('[name="element"]');
  return element ? element.value : "";
}

// Looked up in the form, not the page: the form may have been left (another step opened).
function labelOf(field) {
  const form = field.form || field.closest("form");
  const label = field.id && form ? form.querySelector('label[for="' + CSS.escape(field.id) + '"]') : null;
  if (label) return label.textContent.trim();
  return field.getAttribute("aria-label") || field.name;
}

function stateOf(form) {
  return form.querySelector("[data-panel-state]");
}

function showState(form, kind, text) {
  const state = stateOf(form);
  if (!state) return;
  state.className = "panel-state " + kind;
  state.textContent = text;
}

/** The form's values, as a string, to tell whether it changed while a request was out. */
function snapshot(form) {
  return new URLSearchParams(new FormData(form)).toString();
}

function fieldNamed(form, name) {
  const field = form.elements.namedItem(name);
  return field && field.length !== undefined && !field.tagName ? field[0] : field;
}

function clearErrors(form) {
  form.querySelectorAll("[data-answer]").forEach((el) => el.remove());
  form.querySelectorAll("[data-live-invalid]").forEach((el) => {
    el.classList.remove("invalid");
    el.removeAttribute("data-live-invalid");
  });
  form.querySelectorAll('[aria-invalid="true"]').forEach((el) => el.removeAttribute("aria-invalid"));
  // The prompt's names are checked by the answer now, beside the prompt.
  const check = form.querySelector("#prompt-check");
  if (check) check.innerHTML = "";
}

function fixButton(fix) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "fix";
  button.setAttribute("data-fix-name", fix.name);
  button.setAttribute("data-fix-value", fix.value);
  button.textContent = fix.label;
  return button;
}

function showFieldError(form, name, messages, fixes) {
  const field = fieldNamed(form, name);
  const box = field ? field.closest(".field, .prompt-editor, td, .route-example") || field.parentElement : null;
  if (!box) return false;
  box.classList.add("invalid");
  box.setAttribute("data-live-invalid", "");
  field.setAttribute("aria-invalid", "true");
  messages.forEach((message, i) => {
    const p = document.createElement("p");
    p.className = "field-error";
    p.setAttribute("role", "alert");
    p.setAttribute("data-answer", "");
    p.id = field.id ? field.id + "_live_error_" + i : "";
    p.textContent = message;
    (fixes || []).forEach((fix) => p.append(" ", fixButton(fix)));
    box.appendChild(p);
  });
  return true;
}

/** Show the answer's errors in `form`; return the labels of the fields not applied. */
function showErrors(form, answer) {
  clearErrors(form);
  const labels = [];
  const general = answer.form_errors.slice();
  Object.keys(answer.errors).forEach((name) => {
    const messages = answer.errors[name];
    if (showFieldError(form, name, messages, answer.fixes[name])) {
      labels.push(labelOf(fieldNamed(form, name)));
    } else {
      general.push(...messages.map((m) => name + ": " + m));
    }
  });
  // What the form changed of what was typed (a target a repeat ignores), said once.
  let after = stateOf(form);
  (answer.notes || []).forEach((note) => {
    const p = document.createElement("p");
    p.className = "note";
    p.setAttribute("role", "status");
    p.setAttribute("data-answer", "");
    p.textContent = note;
    after.after(p);
    after = p;
  });
  if (general.length) {
    const box = document.createElement("div");
    box.setAttribute("data-answer", "");
    general.forEach((message) => {
      const p = document.createElement("p");
      p.className = "field-error";
      p.setAttribute("role", "alert");
      p.textContent = message;
      box.appendChild(p);
    });
    stateOf(form).after(box);
    if (!labels.length) labels.push("the form");
  }
  return labels;
}

function valuesOf(formData, names) {
  const kept = {};
  names.forEach((name) => {
    if (formData.has(name)) kept[name] = formData.getAll(name);
  });
  return kept;
}

/**
 * Keep the values of the fields not applied, for the panel opened again; with `typedSince`
 * (the form changed while the answer was on its way), what was typed since stays counted.
 */
function keepUnapplied(form, answer, labels, values, typedSince) {
  const key = panelKey(form);
  const before = store.unappliedOf(key);
  const counted = typedSince && before ? Array.from(new Set(before.labels.concat(labels))) : labels;
  const kept = valuesOf(values, Object.keys(answer.errors));
  store.setUnapplied(key, counted.length ? { labels: counted, values: kept } : null);
}

function post(form) {
  const place = hooks.place(form);
  if (!place) return Promise.resolve();
  const body = new FormData(form);
  body.set("apply", "1");
  Object.keys(place).forEach((name) => body.set(name, place[name]));
  const sent = snapshot(form);
  const values = new FormData(form);
  showState(form, "pending", "Applying…");
  return fetch(form.getAttribute("data-apply-url"), {
    method: "POST",
    credentials: "same-origin",
    headers: { "X-CSRFToken": csrfToken, Accept: "application/json" },
    body: body,
  }).then((response) => {
    if (!response.ok) throw new Error(response.status === 403 ? "You may not change this recipe." : "The server answered " + response.status + ".");
    return response.json();
  }).then((answer) => {
    if (answer.result) hooks.apply(form, answer.result);
    const labels = showErrors(form, answer);
    const typedSince = snapshot(form) !== sent;
    keepUnapplied(form, answer, labels, values, typedSince);
    if (!form.isConnected || typedSince) return;
    if (labels.length) showState(form, "unapplied", "Not applied: " + labels.join(", ") + " (see below)");
    else showState(form, "applied", "All changes applied");
    const added = answer.result && (Object.keys(answer.result.actors || {}).length || Object.keys(answer.result.inputs || {}).length);
    // A new alias or input shows in the form's menus once it is drawn again from the document.
    if (added && !labels.length) hooks.reopen(form);
  }).catch((error) => {
    // Nothing was applied: all that was sent is kept, to be sent again with the next edit.
    store.setUnapplied(panelKey(form), { labels: ["the form"], values: valuesOf(values, Array.from(new Set(values.keys()))) });
    if (form.isConnected) showState(form, "unapplied", "Not applied: " + (error.message || "the server could not be reached") + " Your edits are kept here.");
  });
}

/** Apply `form` now (a request in flight first finishes; the form waits behind it). */
export function applyNow(form) {
  if (waiting === form) {
    clearTimeout(timer);
    timer = null;
    waiting = null;
  }
  if (sending) {
    queued = form;
    return sending;
  }
  sending = post(form).finally(() => {
    sending = null;
    const next = queued;
    queued = null;
    // Sent even if its panel was left meanwhile: a form left holds its values still.
    if (next) applyNow(next);
  });
  return sending;
}

/** Apply the edits waiting for their pause now: the panel is about to be left. */
export function flush() {
  if (waiting) applyNow(waiting);
}

/** Tell whether an edit is waiting to be applied or being applied. */
export function pending() {
  return waiting !== null || sending !== null;
}

/** Note an edit of `field` in `form`; apply it after the pause. */
export function edited(form, field) {
  if (waiting && waiting !== form) flush();
  const key = panelKey(form);
  const kept = store.unappliedOf(key);
  const label = field ? labelOf(field) : "the form";
  const labels = kept ? kept.labels.slice() : [];
  if (labels.indexOf(label) < 0) labels.push(label);
  store.setUnapplied(key, { labels: labels, values: kept ? kept.values : {} });
  showState(form, "pending", "Unapplied changes: " + labels.join(", "));
  clearTimeout(timer);
  waiting = form;
  timer = setTimeout(() => {
    timer = null;
    waiting = null;
    if (form.isConnected) applyNow(form);
  }, APPLY_DELAY_MS);
}

/** A panel drawn again (opened, or re-rendered): put back what it held unapplied, and check it. */
export function restore(form, applied) {
  const kept = store.unappliedOf(panelKey(form));
  if (!kept) {
    if (applied) showState(form, "applied", "All changes applied");
    return;
  }
  Object.keys(kept.values).forEach((name) => {
    const field = fieldNamed(form, name);
    if (!field) return;
    const value = kept.values[name];
    if (field.type === "checkbox") field.checked = value.length > 0;
    else field.value = value[0];
  });
  applyNow(form);
}

function takeFix(button) {
  const form = button.closest("form");
  const name = button.getAttribute("data-fix-name");
  const value = button.getAttribute("data-fix-value");
  const field = fieldNamed(form, name);
  if (field && field.type !== "hidden") {
    field.value = value;
  } else if (!Array.from(form.querySelectorAll('input[type="hidden"]')).some((i) => i.name === name && i.value === value)) {
    const hidden = document.createElement("input");
    hidden.type = "hidden";
    hidden.name = name;
    hidden.value = value;
    form.appendChild(hidden);
  }
  applyNow(form);
}

export function initPanelEdits(panelHooks) {
  hooks = panelHooks;
  const forms = "[data-editor-form]";
  const onEdit = (evt) => {
    const form = evt.target.closest ? evt.target.closest(forms) : null;
    if (!form || !evt.target.name || evt.target.type === "file") return;
    edited(form, evt.target);
  };
  // Text fields, menus and switches all say so with `input`.
  document.addEventListener("input", onEdit);
  // Enter in a one-line field applies at once; the form is never sent as a page.
  document.addEventListener("submit", (evt) => {
    const form = evt.target.closest(forms);
    if (!form) return;
    evt.preventDefault();
    applyNow(form);
  }, true);
  document.addEventListener("keydown", (evt) => {
    const form = evt.key === "Enter" && evt.target.closest ? evt.target.closest(forms) : null;
    if (!form || evt.target.tagName !== "INPUT") return;
    evt.preventDefault();
    applyNow(form);
  });
  document.addEventListener("click", (evt) => {
    const button = evt.target.closest ? evt.target.closest("[data-fix-name]") : null;
    if (button) takeFix(button);
  });
}
