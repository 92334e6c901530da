/*
 * keyboard.js: the editor's shortcuts: Ctrl+S saves; outside text fields, Delete removes the
 * selection, Ctrl+Z undoes, Ctrl+Shift+Z and Ctrl+Y redo.
 */
import { save } from "./saving.js";
import * as store from "./store.js";
import { deleteSelected } from "./toolbar.js";

function isLetter(evt, letter) {
  return evt.key === letter || evt.key === letter.toUpperCase();
}

function onKey(evt) {
  const mod = evt.ctrlKey || evt.metaKey;
  if (mod && isLetter(evt, "s")) {
    evt.preventDefault();
    save(false);
    return;
  }
  const t = evt.target;
  if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
  if (evt.key === "Delete" || evt.key === "Backspace") {
    if (store.graph().elements(":selected").length) {
      evt.preventDefault();
      deleteSelected();
    }
  } else if (mod && isLetter(evt, "z") && evt.shiftKey) {
    evt.preventDefault();
    store.redo();
  } else if (mod && isLetter(evt, "z")) {
    evt.preventDefault();
    store.undo();
  } else if (mod && isLetter(evt, "y")) {
    evt.preventDefault();
    store.redo();
  }
}

export function initKeyboard() {
  document.addEventListener("keydown", onKey);
}
