/*
 * panel-edits.js: the side panels' forms apply as the author types. A moment after the last
 * keystroke (or at once, on Enter, a fix, or leaving the panel) the form is posted with
 * `apply=1`; the server answers with what applies (one undoable change) and what is not right,
 * by field, with the one-click fixes that make it right. Errors are shown beside their fields;
 * what a form holds that is not applied is kept in the store, so the panel opened again shows
 * it, and the save state never says "Saved" over it.
 *
 * What is kept of a form is a list of its fields' states, one per field, in the form's order:
 * {name, value} (a text field, a menu), {name, values} (a menu of many), {name, value,
 * checked} (a checkbox or a radio button, which FormData leaves out when unticked), with
 * `hidden` or `fix` (a hidden input a fix added) for those the author does not see.
 */
import * as store from "./store.js";

// The pause after the last keystroke that makes a burst of typing one change.
const APPLY_DELAY_MS = 500;
const csrfToken = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
// What an error paragraph's id ends with, before its number (aria-describedby names it).
const ERROR_ID = "-live-error-";

let hooks = null; // {place(form), apply(form, result), reopen(form)}: panels.js
let timer = null;
let waiting = null; // the form whose edits wait for the timer
let sending = null; // the request in flight
const queued = new Map(); // panel key → its form, edited while a request was in flight
let settledWaiters = []; // called once nothing waits or is in flight

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

// The visible state follows every keystroke; it is not a live region.
function showState(form, kind, text) {
  const state = stateOf(form);
  if (!state) return;
  state.className = "panel-state " + kind;
  state.textContent = text;
}

// Said to a screen reader once per answer, not on every keystroke.
function announce(form, text) {
  const region = form.querySelector("[data-panel-announce]");
  if (region) region.textContent = text;
}

function isCheckable(field) {
  return field.type === "checkbox" || field.type === "radio";
}

/** Return the state of each field of `form` (see the top of this file). */
function fieldsOf(form) {
  return Array.from(form.elements)
    .filter((f) => f.name && f.tagName !== "FIELDSET" && !/^(file|button|submit|reset)$/.test(f.type))
    .map((f) => {
      if (isCheckable(f)) return { name: f.name, value: f.value, checked: f.checked };
      if (f.type === "select-multiple") return { name: f.name, values: Array.from(f.selectedOptions, (o) => o.value) };
      if (f.type === "hidden") return f.hasAttribute("data-fix") ? { name: f.name, value: f.value, fix: true } : { name: f.name, value: f.value, hidden: true };
      return { name: f.name, value: f.value };
    });
}

function addFixInput(form, name, value) {
  const hidden = document.createElement("input");
  hidden.type = "hidden";
  hidden.name = name;
  hidden.value = value;
  hidden.setAttribute("data-fix", "");
  form.appendChild(hidden);
}

/** Put the kept `states` back into `form`: checkables by (name, value), the others in order. */
function putBack(form, states) {
  const seen = {};
  states.forEach((state) => {
    const fields = Array.from(form.elements).filter((f) => f.name === state.name);
    if (state.fix) {
      if (!fields.some((f) => f.value === state.value)) addFixInput(form, state.name, state.value);
    } else if ("checked" in state) {
      fields.filter((f) => isCheckable(f) && f.value === state.value).forEach((f) => { f.checked = state.checked; });
    } else if (!state.hidden) {
      // Hidden fields say how the form was drawn (counts, builders): the new drawing's stay.
      const index = seen[state.name] = (seen[state.name] ?? -1) + 1;
      const field = fields.filter((f) => !isCheckable(f) && f.type !== "hidden")[index];
      if (!field) return;
      if (state.values) Array.from(field.options).forEach((o) => { o.selected = state.values.includes(o.value); });
      else field.value = state.value;
    }
  });
}

function fieldNamed(form, name) {
  const field = form.elements.namedItem(name);
  return field && field.length !== undefined && !field.tagName ? field[0] : field;
}

function boxOf(field) {
  return field.closest(".field, .prompt-editor, td, .route-example") || field.parentElement;
}

function errorId(field, i) {
  return (field.id || "field-" + field.name.replace(/[^\w-]/g, "_")) + ERROR_ID + i;
}

function fixButton(fix, forName) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "fix";
  button.setAttribute("data-fix-name", fix.name);
  button.setAttribute("data-fix-value", fix.value);
  button.setAttribute("data-fix-for", forName);
  button.textContent = fix.label;
  return button;
}

/**
 * Return the paragraph `id` in `box` saying `message` with its `fixes`: the one shown if it
 * says the same (left as it is, so nothing is said again and a focused fix keeps its focus).
 */
function errorParagraph(box, id, message, fixes, forName) {
  const said = JSON.stringify([message, fixes]);
  const shown = box.querySelector("#" + CSS.escape(id));
  if (shown && shown.getAttribute("data-said") === said) return shown;
  const p = document.createElement("p");
  p.className = "field-error";
  p.id = id;
  p.setAttribute("data-answer-error", "");
  p.setAttribute("data-said", said);
  p.textContent = message;
  fixes.forEach((fix) => p.append(" ", fixButton(fix, forName)));
  if (shown) shown.replaceWith(p);
  else box.appendChild(p);
  return p;
}

// The field's own descriptions (its help) stay; its error paragraphs are named after them.
function describeBy(field, ids) {
  const own = (field.getAttribute("aria-describedby") || "").split(/\s+/).filter((t) => t && t.indexOf(ERROR_ID) < 0);
  const all = own.concat(ids);
  if (all.length) field.setAttribute("aria-describedby", all.join(" "));
  else field.removeAttribute("aria-describedby");
}

function markValid(field) {
  field.removeAttribute("aria-invalid");
  describeBy(field, []);
  const box = boxOf(field);
  if (box) box.classList.remove("invalid");
}

/** Show `messages` under a heading-less box after the panel state (notes, errors of no field). */
function showBelowState(form, kind, messages, className) {
  const said = JSON.stringify(messages);
  const shown = form.querySelector("[data-answer-" + kind + "]");
  if (shown && shown.getAttribute("data-said") === said) return;
  if (shown) shown.remove();
  if (!messages.length) return;
  const box = document.createElement("div");
  box.setAttribute("data-answer-" + kind, "");
  box.setAttribute("data-said", said);
  messages.forEach((message) => {
    const p = document.createElement("p");
    p.className = className;
    p.textContent = message;
    box.appendChild(p);
  });
  stateOf(form).after(box);
}

/** Show the answer's errors in `form`, updating those shown; return the labels not applied. */
function showErrors(form, answer) {
  const labels = [];
  const general = answer.form_errors.slice();
  const kept = new Set();
  const invalid = new Set();
  Object.keys(answer.errors).forEach((name) => {
    const messages = answer.errors[name];
    const field = fieldNamed(form, name);
    const box = field ? boxOf(field) : null;
    if (!box) {
      general.push(...messages.map((m) => name + ": " + m));
      return;
    }
    const ids = messages.map((message, i) => {
      const p = errorParagraph(box, errorId(field, i), message, answer.fixes[name] || [], name);
      kept.add(p);
      return p.id;
    });
    box.classList.add("invalid");
    field.setAttribute("aria-invalid", "true");
    describeBy(field, ids);
    invalid.add(field);
    labels.push(labelOf(field));
  });
  form.querySelectorAll("[data-answer-error]").forEach((p) => { if (!kept.has(p)) p.remove(); });
  form.querySelectorAll('[aria-invalid="true"]').forEach((f) => { if (!invalid.has(f)) markValid(f); });
  // The prompt's names are checked by the answer now, beside the prompt.
  const check = form.querySelector("#prompt-check");
  if (check) check.innerHTML = "";
  // What the form changed of what was typed (a target a repeat ignores), said once.
  showBelowState(form, "notes", answer.notes || [], "note");
  showBelowState(form, "general", general, "field-error");
  if (general.length && !labels.length) labels.push("the form");
  return labels;
}

/** What a panel holds unapplied after an answer: its labels and its fields' states. */
function unappliedAfter(form, answer, labels, sent, typedSince) {
  const before = store.unappliedOf(panelKey(form));
  // Typed since it was sent, or nothing applied: all that was counted still counts.
  const all = typedSince || !answer.result;
  const counted = all && before ? Array.from(new Set(before.labels.concat(labels))) : labels;
  let states = sent.filter((s) => answer.errors[s.name]);
  if (typedSince) states = fieldsOf(form);
  else if (!answer.result) states = sent;
  return counted.length ? { labels: counted, values: states } : null;
}

/** Return a sentence: `text` with a capital and a full stop. */
function sentence(text) {
  const trimmed = text.trim();
  const capital = trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : capital + ".";
}

/** Read the server's answer, or throw an Error whose message says why there is none. */
function readAnswer(response) {
  // A session that ended sends the request to the sign-in page, which answers with HTML.
  if (response.redirected || response.status === 401) throw new Error("Your session has ended: sign in again in another tab, and the edits apply with the next one.");
  if (response.status === 403) throw new Error("You may not change this recipe.");
  if (response.status === 400) {
    return response.text().then((text) => {
      const said = new DOMParser().parseFromString(text, "text/html").body.textContent.trim();
      throw new Error(said ? said.slice(0, 300) : "The server refused the edit.");
    });
  }
  if (!response.ok) throw new Error("The server answered " + response.status + ".");
  if ((response.headers.get("content-type") || "").indexOf("application/json") < 0) throw new Error("The server's answer was not one the editor reads: reload the page.");
  return response.json();
}

function post(form) {
  const place = hooks.place(form);
  if (!place) return Promise.resolve();
  const body = new FormData(form);
  body.set("apply", "1");
  Object.keys(place).forEach((name) => body.set(name, place[name]));
  const sent = fieldsOf(form);
  const sentText = JSON.stringify(sent);
  const fixesSent = Array.from(form.querySelectorAll("input[data-fix]"));
  showState(form, "pending", "Applying…");
  return fetch(form.getAttribute("data-apply-url"), {
    method: "POST",
    credentials: "same-origin",
    headers: { "X-CSRFToken": csrfToken, Accept: "application/json" },
    body: body,
  }).catch(() => {
    throw new Error("The server could not be reached.");
  }).then(readAnswer).then((answer) => {
    const typedSince = JSON.stringify(fieldsOf(form)) !== sentText;
    if (answer.result) {
      hooks.apply(form, answer.result);
      // An answer that applies declared what the fixes sent ask for: sent again, an input or
      // alias deleted since would come back.
      fixesSent.forEach((input) => input.remove());
    }
    const labels = showErrors(form, answer);
    store.setUnapplied(panelKey(form), unappliedAfter(form, answer, labels, sent, typedSince));
    if (!form.isConnected || typedSince) return;
    const notes = (answer.notes || []).join(" ");
    if (labels.length) {
      showState(form, "unapplied", "Not applied: " + labels.join(", ") + " (see below)");
      announce(form, ["Not applied: " + labels.join(", ") + ".", notes].join(" ").trim());
    } else {
      showState(form, "applied", "All changes applied");
      announce(form, ["All changes applied.", notes].join(" ").trim());
    }
    const added = answer.result && (Object.keys(answer.result.actors || {}).length || Object.keys(answer.result.inputs || {}).length);
    // A new alias or input shows in the form's menus once it is drawn again from the document.
    if (added && !labels.length) hooks.reopen(form);
  }).catch((error) => {
    // Nothing was applied: all the form holds is kept, to be sent again with the next edit.
    const key = panelKey(form);
    const before = store.unappliedOf(key);
    store.setUnapplied(key, { labels: before ? before.labels : ["the form"], values: fieldsOf(form) });
    if (!form.isConnected) return;
    const text = "Not applied: " + sentence(error.message || "the server could not be reached") + " Your edits are kept here.";
    showState(form, "unapplied", text);
    announce(form, text);
  });
}

/** Tell whether an edit is waiting to be applied or being applied. */
export function pending() {
  return waiting !== null || sending !== null || queued.size > 0;
}

function callSettled() {
  if (pending()) return;
  const waiters = settledWaiters;
  settledWaiters = [];
  waiters.forEach((resolve) => resolve());
}

/** Apply `form` now (a request in flight first finishes; the form waits behind it, one form per panel). */
export function applyNow(form) {
  if (waiting === form) {
    clearTimeout(timer);
    timer = null;
    waiting = null;
  }
  const key = panelKey(form);
  if (sending) {
    queued.delete(key); // a panel edited again waits in its turn, not in its old place
    queued.set(key, form);
    return sending;
  }
  sending = post(form).finally(() => {
    sending = null;
    const next = queued.entries().next();
    if (!next.done) {
      queued.delete(next.value[0]);
      // Sent even if its panel was left meanwhile: a form left holds its values still.
      applyNow(next.value[1]);
    }
    callSettled();
  });
  return sending;
}

/** Apply the edits waiting for their pause now: the panel is about to be left. */
export function flush() {
  if (waiting) applyNow(waiting);
}

/** Apply what waits now; resolve once every panel edit is answered. */
export function settledEdits() {
  flush();
  if (!pending()) return Promise.resolve();
  return new Promise((resolve) => settledWaiters.push(resolve));
}

/** Note an edit of `field` in `form`; apply it after the pause. */
export function edited(form, field) {
  if (waiting && waiting !== form) flush();
  const key = panelKey(form);
  const kept = store.unappliedOf(key);
  const label = field ? labelOf(field) : "the form";
  const labels = kept ? kept.labels.slice() : [];
  if (labels.indexOf(label) < 0) labels.push(label);
  // All the form holds: the panel drawn again (left, an undo) shows it as typed.
  store.setUnapplied(key, { labels: labels, values: fieldsOf(form) });
  showState(form, "pending", "Unapplied changes: " + labels.join(", "));
  clearTimeout(timer);
  waiting = form;
  timer = setTimeout(() => {
    timer = null;
    waiting = null;
    if (form.isConnected) applyNow(form);
    else callSettled();
  }, APPLY_DELAY_MS);
}

/** A panel drawn again (opened, or re-rendered): put back what it held unapplied, and check it. */
export function restore(form, applied) {
  const kept = store.unappliedOf(panelKey(form));
  if (!kept) {
    if (applied) showState(form, "applied", "All changes applied");
    return;
  }
  putBack(form, kept.values);
  applyNow(form);
}

function takeFix(button) {
  const form = button.closest("form");
  const name = button.getAttribute("data-fix-name");
  const value = button.getAttribute("data-fix-value");
  const field = fieldNamed(form, name);
  if (field && field.type !== "hidden") {
    field.value = value;
  } else if (!Array.from(form.querySelectorAll("input[data-fix]")).some((i) => i.name === name && i.value === value)) {
    addFixInput(form, name, value);
  }
  // The button goes with its error: the author is back on the field it fixed.
  const fixed = fieldNamed(form, button.getAttribute("data-fix-for"));
  if (fixed && fixed.type !== "hidden") fixed.focus();
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
