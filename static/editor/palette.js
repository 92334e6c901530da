/*
 * palette.js: the searchable palette (the "Add step" button, `/` or Ctrl+K): add a step of a
 * kind, go to a step, or run one of the editor's commands, by typing a few letters and Enter.
 * A kind can also be dragged from the palette onto the canvas, where the step is placed.
 *
 * The kinds are listed by the page (one option each, from the catalog); steps and commands are
 * listed here when the palette opens. A command runs the tool bar's own button or the
 * clipboard's function, so each behaviour stays in one place.
 */
import { colourScheme, kindIcon, onColourSchemeChange } from "./canvas-style.js";
import { modelPosition, selectElement } from "./canvas.js";
import { canPaste, copySelection, duplicateSelection, paste } from "./clipboard.js";
import { stepNodes } from "./recipe-graph.js";
import * as store from "./store.js";
import { addStep, deleteSelected } from "./toolbar.js";

// The drag's data type: a kind dropped on the canvas, never text dropped elsewhere.
const DRAG_TYPE = "application/x-branchline-step-kind";
// Listing a thousand steps helps nobody: the search narrows them.
const MAX_STEPS_SHOWN = 30;

const palette = document.getElementById("palette");
const search = document.getElementById("palette-search");
const list = document.getElementById("palette-list");
const opener = document.getElementById("btn-palette");
const status = document.getElementById("palette-status");
let returnFocus = null;
// The step a "+" opened the palette for: the kind picked is added after it, connected to it.
let addAfter = null;
const help = palette.querySelector(".palette-help");
const HELP = help.textContent;

const hasSteps = () => store.graph().nodes(':selected[kind = "step"]').nonempty();
const hasSelection = () => store.graph().elements(":selected").filter('[kind = "step"], [kind = "branch"]').nonempty();
const clickButton = (id) => () => document.getElementById(id).click();

// Each command: its label, its shortcut as shown, words it is found by, when it can run, and what it does.
const COMMANDS = [
  { id: "copy", label: "Copy the selected steps", keys: "Ctrl+C", words: "clipboard", when: hasSteps, run: copySelection },
  { id: "paste", label: "Paste steps", keys: "Ctrl+V", words: "clipboard", when: canPaste, run: () => paste() },
  { id: "duplicate", label: "Duplicate the selected steps", keys: "Ctrl+D", words: "copy clone", when: hasSteps, run: duplicateSelection },
  { id: "delete", label: "Delete the selection", keys: "Delete", words: "remove", when: hasSelection, run: deleteSelected },
  { id: "undo", label: "Undo", keys: "Ctrl+Z", words: "back", run: clickButton("btn-undo") },
  { id: "redo", label: "Redo", keys: "Ctrl+Shift+Z", words: "again", run: clickButton("btn-redo") },
  { id: "connect", label: "Connect mode: draw branches", words: "branch edge link", run: clickButton("btn-connect") },
  { id: "fit", label: "Fit the recipe in view", words: "zoom view", run: clickButton("btn-fit") },
  { id: "layout", label: "Lay the steps out", words: "arrange tidy", run: clickButton("btn-layout") },
  { id: "save", label: "Save the draft", keys: "Ctrl+S", words: "store", run: clickButton("btn-save") },
];

function option(id, label, words, extra) {
  const li = document.createElement("li");
  li.id = "palette-" + id;
  li.className = "palette-item " + (extra || "");
  li.setAttribute("role", "option");
  li.setAttribute("aria-selected", "false");
  li.dataset.search = (label + " " + words).toLowerCase();
  const name = document.createElement("span");
  name.className = "palette-label";
  name.textContent = label;
  li.appendChild(name);
  return li;
}

function hint(li, text) {
  const small = document.createElement("small");
  small.className = "palette-keys";
  small.textContent = text;
  li.appendChild(small);
}

// Steps and commands are listed afresh at each opening; the kinds stay (the page lists them).
function fill() {
  list.querySelectorAll(".palette-item.dynamic").forEach((li) => li.remove());
  help.textContent = addAfter ? "Pick the kind of the step to add after “" + (addAfter.data("step").name || addAfter.data("key")) + "”, connected to it." : HELP;
  if (addAfter) return; // kinds only
  stepNodes(store.graph()).forEach((node) => {
    const step = node.data("step");
    const li = option("step-" + node.id(), "Go to " + (step.name || node.data("key")), "step " + node.data("key"), "dynamic goto");
    hint(li, node.data("key"));
    li.dataset.goto = node.id();
    list.appendChild(li);
  });
  COMMANDS.forEach((command) => {
    if (command.when && !command.when()) return;
    const li = option("cmd-" + command.id, command.label, command.words, "dynamic command");
    if (command.keys) hint(li, command.keys);
    li.dataset.command = command.id;
    list.appendChild(li);
  });
}

function items() {
  return Array.from(list.querySelectorAll(".palette-item"));
}

function visibleItems() {
  return items().filter((li) => !li.hidden);
}

function setActive(li) {
  items().forEach((item) => item.setAttribute("aria-selected", item === li ? "true" : "false"));
  if (li) {
    search.setAttribute("aria-activedescendant", li.id);
    li.scrollIntoView({ block: "nearest" });
  } else {
    search.removeAttribute("aria-activedescendant");
  }
}

function active() {
  return list.querySelector('.palette-item[aria-selected="true"]');
}

/** Show the items that have every word typed, kinds first; at most MAX_STEPS_SHOWN steps. */
function filter() {
  const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
  let steps = 0;
  items().forEach((li) => {
    let shown = words.every((w) => li.dataset.search.indexOf(w) >= 0);
    if (shown && li.classList.contains("goto")) {
      steps += 1;
      shown = steps <= MAX_STEPS_SHOWN;
    }
    li.hidden = !shown;
  });
  const shown = visibleItems();
  status.textContent = shown.length ? shown.length + (shown.length === 1 ? " result" : " results") : "Nothing matches.";
  // What the words name comes before what only its help mentions ("go to revi": the step
  // Review, not the kind whose help says where the run goes to).
  const named = shown.find((li) => {
    const label = li.querySelector(".palette-label").textContent.toLowerCase();
    return words.every((w) => label.indexOf(w) >= 0);
  });
  setActive(named || shown[0] || null);
}

/** Open the palette with the search focused; with `after` (a step), to add the step after it. */
export function openPalette(after) {
  if (!palette.hidden && !after) {
    search.focus();
    return;
  }
  if (palette.hidden) returnFocus = document.activeElement;
  addAfter = after || null;
  fill();
  search.value = "";
  palette.hidden = false;
  opener.setAttribute("aria-expanded", "true");
  filter();
  search.focus();
}

/** Close the palette; focus goes back where it was unless `keepFocus`. */
export function closePalette(keepFocus) {
  if (palette.hidden) return;
  palette.hidden = true;
  addAfter = null;
  opener.setAttribute("aria-expanded", "false");
  setActive(null);
  if (!keepFocus && returnFocus && document.contains(returnFocus)) returnFocus.focus();
  returnFocus = null;
}

function choose(li) {
  if (!li) return;
  const after = addAfter;
  closePalette(true);
  if (li.dataset.addStep) {
    addStep(li.dataset.addStep, undefined, after && after.inside() ? after : undefined);
  } else if (li.dataset.goto) {
    selectElement(li.dataset.goto);
  } else if (li.dataset.command) {
    COMMANDS.find((c) => c.id === li.dataset.command).run();
  }
  // The canvas takes the keys next (Delete, Ctrl+C…) unless the choice opened a form.
  if (!document.activeElement || document.activeElement === document.body) document.getElementById("cy").focus();
}

function onSearchKey(evt) {
  const shown = visibleItems();
  const at = shown.indexOf(active());
  if (evt.key === "ArrowDown" || evt.key === "ArrowUp") {
    evt.preventDefault();
    if (!shown.length) return;
    const step = evt.key === "ArrowDown" ? 1 : -1;
    setActive(shown[(at + step + shown.length) % shown.length]);
  } else if (evt.key === "Enter") {
    evt.preventDefault();
    choose(active());
  } else if (evt.key === "Escape") {
    evt.preventDefault();
    closePalette(false);
  }
}

function initDragging() {
  list.querySelectorAll("[data-add-step]").forEach((li) => {
    li.addEventListener("dragstart", (evt) => {
      evt.dataTransfer.setData(DRAG_TYPE, li.dataset.addStep);
      evt.dataTransfer.effectAllowed = "copy";
    });
  });
  const area = document.querySelector(".canvas-area");
  area.addEventListener("dragover", (evt) => {
    if (evt.dataTransfer.types.indexOf(DRAG_TYPE) < 0) return;
    evt.preventDefault();
    evt.dataTransfer.dropEffect = "copy";
    area.classList.add("drop-target");
  });
  area.addEventListener("dragleave", () => area.classList.remove("drop-target"));
  area.addEventListener("drop", (evt) => {
    area.classList.remove("drop-target");
    const kind = evt.dataTransfer.getData(DRAG_TYPE);
    if (!kind) return;
    evt.preventDefault();
    closePalette(true);
    addStep(kind, modelPosition(evt));
  });
}

function drawIcons(scheme) {
  list.querySelectorAll("[data-add-step] img.palette-icon").forEach((icon) => {
    icon.src = kindIcon(icon.closest("[data-add-step]").dataset.addStep, scheme);
  });
}

export function initPalette() {
  drawIcons(colourScheme());
  onColourSchemeChange(drawIcons);
  list.querySelectorAll("[data-add-step]").forEach((li) => {
    li.dataset.search = li.dataset.search.toLowerCase();
  });
  opener.addEventListener("click", () => (palette.hidden ? openPalette() : closePalette(false)));
  search.addEventListener("input", filter);
  search.addEventListener("keydown", onSearchKey);
  list.addEventListener("click", (evt) => choose(evt.target.closest(".palette-item")));
  list.addEventListener("mousemove", (evt) => {
    const li = evt.target.closest(".palette-item");
    if (li && li !== active()) setActive(li);
  });
  // A click anywhere else closes it (a drag onto the canvas closes it when it drops).
  document.addEventListener("mousedown", (evt) => {
    if (!palette.hidden && !palette.contains(evt.target) && !opener.contains(evt.target)) closePalette(true);
  });
  initDragging();
}
