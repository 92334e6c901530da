/*
 * runs-overlay.js: runs on the canvas. The tool bar's Runs button draws over the draft what the
 * last runs of a published version did: how many of them ran each step and took each branch (a
 * line added to the labels), a heat scale on the branches (colour and width by how often each
 * was taken, against the most taken), the branches no run took dimmed; a click on a branch (its
 * count is part of its label), Enter on a selected one, or its row in the panel's list shows
 * the runs that took it, each linking to its monitor.
 *
 * A view, not an edit: it marks the graph with classes and data of its own (`runs-*`,
 * `runs*`), never through the store, so the draft is not made dirty, nothing enters the undo
 * history and nothing of it is saved; turning it off removes exactly what it added. The counts
 * come from GET /recipes/SLUG/runs-overlay/ (editor/views/runs_overlay.py), keyed by step key
 * and branch name: those of branches the draft no longer has are listed in a note. Text from
 * the server is only ever set as text.
 */
import { colourScheme, HEAT_LEVELS, heatScale, onColourSchemeChange } from "./canvas-style.js";
import { branchEdges, stepNodes } from "./recipe-graph.js";
import * as store from "./store.js";

const HEAT_CLASSES = Array.from({ length: HEAT_LEVELS }, (_, i) => "runs-heat-" + (i + 1));
const CLASSES = ["runs-count", "runs-zero", "runs-absent", "runs-none"].concat(HEAT_CLASSES).join(" ");
const DATA = "runsLabel runsRuns runsTaken";

let url = "";
let shown = false;
let answer = null; // the last answer drawn (null while off)
let asked = 0; // numbers the requests: only the latest answer is drawn
let counts = new Map(); // edge id -> what the runs did with its branch
let opener = null; // what had the focus when the popover opened
let dom = {};

function plural(n, word) {
  return n + " " + word + (n === 1 ? "" : "s");
}

function key(step, branch) {
  return step + "\u0000" + branch;
}

/** Return a branch's heat, 1 (least) to HEAT_LEVELS (most taken), or 0 when never taken. */
export function heatLevel(taken, max) {
  if (!taken || !max) return 0;
  return Math.max(1, Math.min(HEAT_LEVELS, Math.ceil((taken / max) * HEAT_LEVELS)));
}

function countText(found) {
  if (!found.runs) return "0 runs";
  return plural(found.runs, "run") + (found.taken > found.runs ? " · " + found.taken + "×" : "");
}

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

// -- marking the graph -----------------------------------------------------------------------

function unmark() {
  const cy = store.graph();
  const marked = cy.elements(".runs-count");
  if (marked.empty()) return;
  cy.batch(() => {
    marked.removeClass(CLASSES);
    marked.removeData(DATA);
  });
}

function mark(ele, line, runs, taken, classes) {
  ele.data({ runsLabel: ele.data("label") + "\n" + line, runsRuns: runs, runsTaken: taken });
  ele.addClass("runs-count " + classes);
}

/** Draw the answer on the graph as it is now; return the counts no element shows. */
function markGraph() {
  const cy = store.graph();
  const version = answer.version;
  const inVersion = new Set();
  const stepsInVersion = new Set();
  version.graph.forEach((step) => {
    stepsInVersion.add(step.step);
    step.branches.forEach((name) => inVersion.add(key(step.step, name)));
  });
  const visits = new Map(answer.steps.map((s) => [s.step, s.runs]));
  // The draft's steps and branches by key and name (the first of each, as edgeByName finds
  // them), read once: a recipe of a thousand steps is not searched once per count.
  const nodes = new Map();
  const edges = new Map();
  stepNodes(cy).forEach((node) => {
    if (nodes.has(node.data("key"))) return;
    nodes.set(node.data("key"), node);
    branchEdges(node).forEach((edge) => {
      const name = key(node.data("key"), edge.data("branch").name);
      if (!edges.has(name)) edges.set(name, edge);
    });
  });
  counts = new Map();
  const missing = [];
  answer.branches.forEach((found) => {
    const edge = edges.get(key(found.step, found.branch));
    if (edge) counts.set(edge.id(), found);
    else missing.push(found);
  });
  answer.steps.forEach((s) => {
    if (!nodes.has(s.step)) missing.push({ step: s.step, branch: null, runs: s.runs });
  });
  let max = 0;
  counts.forEach((found) => {
    max = Math.max(max, found.taken);
  });
  const absent = "not in " + version.label;
  cy.batch(() => {
    stepNodes(cy).forEach((node) => {
      const stepKey = node.data("key");
      const runs = visits.get(stepKey) || 0;
      if (!stepsInVersion.has(stepKey)) mark(node, absent, 0, 0, "runs-none");
      else mark(node, plural(runs, "run"), runs, 0, runs ? "" : "runs-none");
    });
    cy.edges('[kind = "branch"]').forEach((edge) => {
      const name = edge.data("branch").name;
      const stepKey = edge.source().data("key");
      const found = counts.get(edge.id());
      if (found) {
        mark(edge, countText(found), found.runs, found.taken, "runs-heat-" + heatLevel(found.taken, max));
      } else if (inVersion.has(key(stepKey, name))) {
        counts.set(edge.id(), { step: stepKey, branch: name, runs: 0, taken: 0, run_ids: [] });
        mark(edge, "0 runs", 0, 0, "runs-zero");
      } else {
        mark(edge, absent, 0, 0, "runs-absent");
      }
    });
  });
  return missing;
}

// -- the panel -------------------------------------------------------------------------------

function summaryText() {
  if (!answer.versions.length) return "No published version yet: publish the recipe, and its runs show here.";
  if (!answer.version) return "No published version has runs yet.";
  const n = answer.runs.length;
  const label = answer.version.label;
  if (!n) return label + " has no runs yet.";
  if (n === answer.last) return "The last " + plural(n, "run") + " of " + label + ".";
  return (n === 1 ? "The only run" : "All " + n + " runs") + " of " + label + ".";
}

function fillChoices() {
  const version = dom.version;
  version.replaceChildren();
  answer.versions.forEach((v) => {
    const option = element("option", "", v.label + (v.has_runs ? "" : " (no runs)"));
    option.value = String(v.number);
    option.selected = !!answer.version && answer.version.number === v.number;
    version.append(option);
  });
  version.disabled = !answer.versions.length;
  const last = dom.last;
  last.replaceChildren();
  const choices = answer.choices.indexOf(answer.last) < 0 ? answer.choices.concat([answer.last]).sort((a, b) => a - b) : answer.choices;
  choices.forEach((n) => {
    const option = element("option", "", String(n));
    option.value = String(n);
    option.selected = n === answer.last;
    last.append(option);
  });
}

/** Return a list item naming a branch (or a step), with a button listing its runs if any. */
function countItem(found, label) {
  const item = element("li");
  item.append(element("span", "runs-branch-name", label));
  if (found.branch !== null && found.runs) {
    const button = element("button", "link");
    button.type = "button";
    button.append(element("span", "visually-hidden", "Runs that took " + label + ": "), countText(found));
    button.addEventListener("click", () => openPopover(found, button));
    item.append(button);
  } else {
    item.append(element("span", "muted", found.branch === null ? plural(found.runs, "run") : countText(found)));
  }
  return item;
}

function fillList() {
  const list = dom.branchList;
  list.replaceChildren();
  const cy = store.graph();
  stepNodes(cy).forEach((node) => {
    branchEdges(node).forEach((edge) => {
      const found = counts.get(edge.id());
      if (found) list.append(countItem(found, node.data("key") + " · " + edge.data("branch").name));
    });
  });
  dom.branches.hidden = !list.children.length;
}

function fillNote(missing) {
  const note = dom.note;
  note.replaceChildren();
  note.hidden = !missing.length;
  if (!missing.length) return;
  note.append(element("p", "", "Not on the canvas (renamed or removed since " + answer.version.label + "):"));
  const list = element("ul");
  missing.forEach((found) => {
    list.append(countItem(found, found.branch === null ? "step " + found.step : found.step + " · " + found.branch));
  });
  note.append(list);
}

// Drawn again when the colour scheme changes, as the branches are.
function fillLegend(scheme) {
  const legend = dom.legend;
  legend.replaceChildren(element("span", "", "fewer"));
  heatScale(scheme).forEach((h) => {
    const swatch = element("span", "swatch");
    swatch.style.background = h.color;
    swatch.style.height = h.width + "px";
    legend.append(swatch);
  });
  legend.append(element("span", "", "more often taken"));
  legend.append(element("span", "runs-legend-zero", "Grey: taken by none of them; dashed: not in the version."));
}

function setState(state, message) {
  dom.panel.dataset.state = state;
  if (message !== undefined) dom.summary.textContent = message;
}

/** Draw the last answer (again: after an edit, the draft's elements may have changed). */
function draw() {
  closePopover(false);
  unmark();
  counts = new Map();
  const missing = answer.version ? markGraph() : [];
  fillList();
  fillNote(missing);
}

function load(params) {
  asked += 1;
  const mine = asked;
  setState("loading", "Loading the runs…");
  const query = new URLSearchParams(params).toString();
  fetch(url + (query ? "?" + query : ""), { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((response) => response.json().then(
      (body) => ({ ok: response.ok, body: body }),
      () => ({ ok: false, body: { errors: ["The server could not answer (" + response.status + "). Reload the page."] } }),
    ))
    .then((result) => {
      if (mine !== asked || !shown) return;
      if (!result.ok) {
        setState("error", (result.body.errors || ["The server could not answer."]).join(" "));
        return;
      }
      answer = result.body;
      fillChoices();
      draw();
      setState("shown", summaryText());
    })
    .catch(() => {
      if (mine === asked && shown) setState("error", "Could not reach the server. Try again.");
    });
}

function choose() {
  load({ version: dom.version.value, last: dom.last.value });
}

function show(on) {
  shown = on;
  dom.button.setAttribute("aria-pressed", on ? "true" : "false");
  dom.panel.hidden = !on;
  if (on) {
    // Shown again: the version and number chosen before, with what runs there are now.
    load(dom.last.options.length ? { version: dom.version.value, last: dom.last.value } : {});
    return;
  }
  asked += 1; // an answer still on its way is not drawn
  answer = null;
  counts = new Map();
  closePopover(false);
  unmark();
  dom.panel.dataset.state = "off";
}

// -- the popover -----------------------------------------------------------------------------

function runItem(run) {
  const item = element("li");
  const link = element("a", "", "Run #" + run.id);
  link.href = run.url;
  const status = element("span", "badge " + run.status, run.status_label);
  const time = element("time", "", new Date(run.created_at).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }));
  time.dateTime = run.created_at;
  item.append(link, status, time);
  return item;
}

/** Show the runs that took `found`'s branch, beside `from` (an element) or at `at` (canvas px). */
function openPopover(found, from, at) {
  const pop = dom.popover;
  const runs = new Map(answer.runs.map((run) => [run.id, run]));
  dom.popTitle.textContent = found.step + " · " + found.branch;
  dom.popSummary.textContent = !found.runs
    ? "None of these " + plural(answer.runs.length, "run") + " took it."
    : plural(found.runs, "run") + " of " + answer.runs.length + " took it" + (found.taken > found.runs ? ", " + found.taken + " times in all" : "") + ".";
  dom.popList.replaceChildren(...found.run_ids.filter((id) => runs.has(id)).map((id) => runItem(runs.get(id))));
  dom.popMore.hidden = found.runs <= found.run_ids.length;
  dom.popMore.textContent = "The newest " + found.run_ids.length + " are listed.";
  pop.hidden = false;
  document.getElementById("edge-tip").hidden = true;
  const area = pop.offsetParent.getBoundingClientRect();
  let point = at;
  if (!point) {
    const box = from.getBoundingClientRect();
    point = { x: box.right - area.left, y: box.top - area.top };
  }
  const left = Math.max(4, Math.min(point.x + 12, area.width - pop.offsetWidth - 4));
  const top = Math.max(4, Math.min(point.y + 12, area.height - pop.offsetHeight - 4));
  pop.style.left = Math.round(left) + "px";
  pop.style.top = Math.round(top) + "px";
  opener = from;
  pop.focus();
}

function closePopover(returnFocus) {
  if (dom.popover.hidden) return;
  dom.popover.hidden = true;
  const back = opener;
  opener = null;
  if (returnFocus && back && document.contains(back)) back.focus();
}

function openForEdge(edge, at) {
  const found = counts.get(edge.id());
  if (!shown || !answer || !found) return;
  openPopover(found, document.getElementById("cy"), at || edge.renderedMidpoint());
}

export function initRunsOverlay(config) {
  url = config.urls.runsOverlay;
  dom = {
    button: document.getElementById("btn-runs"),
    panel: document.getElementById("runs-overlay"),
    close: document.getElementById("runs-overlay-close"),
    version: document.getElementById("runs-version"),
    last: document.getElementById("runs-last"),
    summary: document.getElementById("runs-summary"),
    legend: document.getElementById("runs-legend"),
    note: document.getElementById("runs-note"),
    branches: document.getElementById("runs-branches"),
    branchList: document.getElementById("runs-branch-list"),
    popover: document.getElementById("runs-popover"),
    popTitle: document.getElementById("runs-popover-title"),
    popSummary: document.getElementById("runs-popover-summary"),
    popList: document.getElementById("runs-popover-list"),
    popMore: document.getElementById("runs-popover-more"),
    popClose: document.getElementById("runs-popover-close"),
  };
  dom.panel.dataset.state = "off";
  fillLegend(colourScheme());
  onColourSchemeChange(fillLegend);
  dom.button.addEventListener("click", () => show(!shown));
  dom.close.addEventListener("click", () => {
    show(false);
    dom.button.focus();
  });
  dom.version.addEventListener("change", choose);
  dom.last.addEventListener("change", choose);
  dom.popClose.addEventListener("click", () => closePopover(true));

  const cy = store.graph();
  cy.on("tap", 'edge[kind = "branch"]', (evt) => openForEdge(evt.target, evt.renderedPosition));
  // Keyboard: with a branch selected (from the step list) and the canvas focused, Enter.
  document.getElementById("cy").addEventListener("keydown", (evt) => {
    if (evt.key !== "Enter" || !shown) return;
    const edge = cy.edges(':selected[kind = "branch"]').first();
    if (edge.nonempty()) {
      evt.preventDefault();
      openForEdge(edge);
    }
  });
  document.addEventListener("keydown", (evt) => {
    if (evt.key === "Escape" && !dom.popover.hidden) {
      evt.preventDefault();
      closePopover(true);
    }
  });
  document.addEventListener("pointerdown", (evt) => {
    if (!dom.popover.hidden && !dom.popover.contains(evt.target)) closePopover(false);
  }, true);
  // An edit changes the elements and their labels: draw the counts on them again. Undoing the
  // removal of an element brings it back as it was removed, marks included: off, they go.
  store.subscribe((event) => {
    if (event !== "change") return;
    if (shown && answer) draw();
    else unmark();
  });
}
