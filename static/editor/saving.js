/*
 * saving.js: saving the draft (PUT, with the revision it was based on, so a save made elsewhere
 * since is a conflict the author resolves, never a lost edit), autosave a moment after the last
 * edit, the save state shown, publishing only what was saved, and the warning before leaving
 * with unsaved changes. A draft with errors saves as written (the problems panel lists them);
 * only publishing needs it clean.
 */
import * as store from "./store.js";

const saveState = document.getElementById("save-state");
const conflict = document.getElementById("conflict");
const saveErrors = document.getElementById("save-errors");
const autosave = document.getElementById("autosave");
const csrfToken = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
let saveUrl = "";
let saving = null; // the last save asked for, until it has answered
let allowUnload = false;
let autosaveTimer = null;

// Autosave waits this long after the last edit, so a burst of edits is one save.
const AUTOSAVE_MS = 2000;
// The author's choice, kept for this browser (on unless turned off).
const AUTOSAVE_KEY = "branchline.autosave";

/** Tell whether a save is in flight. */
export function inFlight() {
  return saving !== null;
}

// How many errors the saved draft has: 0, a count from the last save, or -1 for some (a draft
// opened as saved with errors: the problems panel counts them).
let savedErrors = 0;

function savedText() {
  if (!savedErrors) return "Saved";
  const count = savedErrors > 0 ? savedErrors + (savedErrors === 1 ? " error" : " errors") : "errors";
  return "Saved with " + count + " (fix to publish)";
}

// Edits a panel holds but has not applied yet come first: saving would not keep them.
function unappliedText(fields) {
  if (!fields.length) return "";
  return "● Unapplied changes: " + (fields.length === 1 ? fields[0] : fields.length + " fields");
}

function showDirty(dirty) {
  const unappliedState = unappliedText(store.unappliedFields());
  const marked = dirty || unappliedState !== "";
  saveState.textContent = unappliedState || (dirty ? "● Unsaved changes" : savedText());
  saveState.classList.toggle("dirty", marked);
  document.title = (marked ? "● " : "") + document.title.replace(/^● /, "");
}

function showSaveErrors(errors) {
  saveErrors.innerHTML = "";
  const p = document.createElement("p");
  p.textContent = "The draft was not saved:";
  saveErrors.appendChild(p);
  const ul = document.createElement("ul");
  errors.forEach((error) => {
    const li = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "link";
    button.setAttribute("data-path", String(error).split(": ")[0]);
    button.textContent = error;
    li.appendChild(button);
    ul.appendChild(li);
  });
  saveErrors.appendChild(ul);
  saveErrors.hidden = false;
}


/** Save a moment after the last edit, unless a conflict waits for the author's choice. */
function scheduleAutosave() {
  clearTimeout(autosaveTimer);
  if (!autosave.checked) return;
  autosaveTimer = setTimeout(() => {
    autosaveTimer = null;
    if (autosave.checked && conflict.hidden && store.checkDirty()) save(false);
  }, AUTOSAVE_MS);
}

function initAutosave() {
  try {
    autosave.checked = window.localStorage.getItem(AUTOSAVE_KEY) !== "off";
  } catch (e) {
    autosave.checked = true; // storage refused (private mode): autosave as by default
  }
  autosave.addEventListener("change", () => {
    try {
      window.localStorage.setItem(AUTOSAVE_KEY, autosave.checked ? "on" : "off");
    } catch (e) {
      // not remembered; the choice holds for this page
    }
    scheduleAutosave();
  });
}

function saveNow(force) {
  const current = store.current();
  const body = { document: current.document };
  if (!force) body.revision = store.getRevision();
  saveState.textContent = "Saving…";
  return fetch(saveUrl, {
    method: "PUT",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrfToken },
    body: JSON.stringify(body),
  }).then((response) => response.json().catch(() => ({})).then((data) => {
    if (response.ok) {
      store.markSaved(current.document, data.revision);
      conflict.hidden = true;
      saveErrors.hidden = true;
      // A draft saved with errors is saved: the state says so, and that publishing waits.
      savedErrors = (data.errors || []).length;
      store.checkDirty();
      return true;
    }
    store.checkDirty();
    if (response.status === 409) {
      document.getElementById("conflict-detail").textContent = (data.errors || []).join(" ");
      conflict.hidden = false;
      conflict.scrollIntoView({ block: "nearest" });
    } else if (response.status === 400) {
      showSaveErrors(data.errors || ["$: the server refused the draft"]);
    } else {
      showSaveErrors(["$: the server answered " + response.status + "; your changes are kept here"]);
    }
    return false;
  })).catch(() => {
    store.checkDirty();
    showSaveErrors(["$: the server could not be reached; your changes are kept here"]);
    return false;
  });
}

/** Save the draft after any save in flight (each carries the revision the one before got). */
export function save(force) {
  const run = () => saveNow(force);
  const mine = (saving || Promise.resolve(true)).then(run, run);
  saving = mine;
  const done = () => {
    if (saving === mine) saving = null;
  };
  mine.then(done, done);
  return mine;
}

/** Resolve true once the saved draft is what the canvas shows, saving it if needed. */
function flushSave() {
  return (saving || Promise.resolve(true)).then((ok) => {
    if (!ok) return false;
    return store.checkDirty() ? save(false) : true;
  }, () => false);
}

function downloadMine(slug) {
  const blob = new Blob([JSON.stringify(store.current().document, null, 2)], { type: "application/json" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = slug + ".mine.json";
  document.body.appendChild(a);
  a.click();
  a.remove();
}

function closest(evt, selector) {
  const elt = evt.detail.elt;
  return elt && elt.closest ? elt.closest(selector) : null;
}

export function initSaving(config) {
  saveUrl = config.urls.save;
  savedErrors = config.unfinished ? -1 : 0;
  showDirty(false);
  initAutosave();
  store.subscribe((event, detail) => {
    if (event === "dirty") showDirty(detail.dirty);
    if (event === "unapplied") showDirty(store.isDirty());
    if (event === "edited") scheduleAutosave();
  });

  // The server refuses these if the draft was saved elsewhere since this revision (409).
  document.body.addEventListener("htmx:configRequest", (evt) => {
    if (closest(evt, "[data-needs-revision], [data-needs-save]")) {
      evt.detail.parameters.revision = String(store.getRevision());
    }
  });

  // Publishing uses the saved draft: it waits for a save in flight and saves what the canvas
  // shows first. Dirtiness is worked out here, not read from the store's flag, which follows an
  // edit only after a short delay: an edit applied just before the click must be published.
  document.body.addEventListener("htmx:confirm", (evt) => {
    if (!closest(evt, "[data-needs-save]")) return;
    if (!store.checkDirty() && !saving) return;
    evt.preventDefault();
    flushSave().then((ok) => {
      if (ok) evt.detail.issueRequest(true);
    });
  });

  // Restoring a version or importing a file reloads the page once the author confirmed it.
  document.body.addEventListener("htmx:beforeRequest", (evt) => {
    if (closest(evt, "[data-needs-revision]")) allowUnload = true;
  });
  document.body.addEventListener("htmx:afterRequest", (evt) => {
    if (!closest(evt, "[data-needs-revision]")) return;
    const xhr = evt.detail.xhr;
    if (!xhr || xhr.getResponseHeader("HX-Refresh") !== "true") allowUnload = false;
  });

  document.getElementById("btn-save").addEventListener("click", () => save(false));
  document.getElementById("btn-conflict-overwrite").addEventListener("click", () => save(true));
  document.getElementById("btn-conflict-reload").addEventListener("click", () => {
    allowUnload = true;
    window.location.reload();
  });
  document.getElementById("btn-conflict-download").addEventListener("click", () => downloadMine(config.slug));
  document.getElementById("btn-export").addEventListener("click", (evt) => {
    if (store.isDirty() && !window.confirm("Export downloads the saved draft, without your unsaved changes. Continue?")) evt.preventDefault();
  });
  window.addEventListener("beforeunload", (evt) => {
    if ((store.isDirty() || store.unappliedFields().length) && !allowUnload) {
      evt.preventDefault();
      evt.returnValue = "";
    }
  });
}
