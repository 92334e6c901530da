/*
 * keyboard.js: the editor's shortcuts: Ctrl+S saves; outside text fields (where these keys
 * edit text), `/` and Ctrl+K open the palette, Delete removes the selection, Ctrl+C / Ctrl+V / Ctrl+D copy,
 * paste and duplicate steps, Ctrl+Z undoes, Ctrl+Shift+Z and Ctrl+Y redo.
 */
import { copySelection, duplicateSelection, paste } from "./clipboard.js";
import { openPalette } from "./palette.js";
import { save } from "./saving.js";
import * as store from "./store.js";
import { deleteSelected, redo, undo } from "./toolbar.js";

// Text selected on the page is the browser's to copy, not the canvas's.
function textSelected() {
  const selection = window.getSelection();
  return selection && !selection.isCollapsed && selection.toString() !== "";
}

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
  if ((evt.key === "/" && !mod) || (mod && isLetter(evt, "k"))) {
    evt.preventDefault();
    openPalette();
  } else if (mod && !evt.shiftKey && isLetter(evt, "c") && !textSelected()) {
    if (copySelection()) evt.preventDefault();
  } else if (mod && !evt.shiftKey && isLetter(evt, "v")) {
    if (paste()) evt.preventDefault();
  } else if (mod && !evt.shiftKey && isLetter(evt, "d")) {
    evt.preventDefault(); // never the browser's bookmark dialog while editing
    duplicateSelection();
  } else if (evt.key === "Delete" || evt.key === "Backspace") {
    if (store.graph().elements(":selected").length) {
      evt.preventDefault();
      deleteSelected();
    }
  } else if (mod && isLetter(evt, "z") && evt.shiftKey) {
    evt.preventDefault();
    redo();
  } else if (mod && isLetter(evt, "z")) {
    evt.preventDefault();
    undo();
  } else if (mod && isLetter(evt, "y")) {
    evt.preventDefault();
    redo();
  }
}

export function initKeyboard() {
  document.addEventListener("keydown", onKey);
}
