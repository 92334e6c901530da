/*
 * tabs.js: the side panel's tabs (Properties, Recipe, Test run, Tests, Versions, Triggers); a tab's
 * content is loaded from the server when it is shown.
 */
import { flush } from "./panel-edits.js";
import * as store from "./store.js";

const TABS = ["properties", "recipe", "testrun", "tests", "versions", "triggers"];
let urls = {};
let testrunDocument = null; // the document the test-run form was built from, as JSON

// The test-run form is built from the canvas document (its inputs, its actors' aliases): it is
// built again when the canvas changed since, with what was typed in it kept.
function loadTestRun() {
  const json = JSON.stringify(store.current().document);
  const form = document.querySelector("#panel-testrun form");
  if (form && json === testrunDocument) return Promise.resolve();
  const values = {};
  if (form) {
    new FormData(form).forEach((value, name) => {
      if (name.startsWith("input_") || name.startsWith("script_")) values[name] = value;
    });
  }
  values.document = json;
  testrunDocument = json;
  return htmx.ajax("POST", urls.testrunPanel, { source: "#panel-testrun", target: "#panel-testrun", swap: "innerHTML", values: values });
}

function loadTab(name) {
  if (name === "recipe") {
    const values = { document: JSON.stringify(store.current().document) };
    return htmx.ajax("POST", urls.recipePanel, { source: "#panel-recipe", target: "#panel-recipe", swap: "innerHTML", values: values });
  }
  if (name === "testrun") return loadTestRun();
  if (name === "tests") return htmx.ajax("GET", urls.tests, { source: "#panel-tests", target: "#panel-tests", swap: "innerHTML" });
  if (name === "versions") return htmx.ajax("GET", urls.versions, { source: "#panel-versions", target: "#panel-versions", swap: "innerHTML" });
  if (name === "triggers") return htmx.ajax("GET", urls.triggers, { source: "#panel-triggers", target: "#panel-triggers", swap: "innerHTML" });
  return Promise.resolve();
}

/** Show the tab `name`, loading its content unless `load` is false. */
export function showTab(name, load) {
  flush(); // what was typed in the tab left applies
  TABS.forEach((tab) => {
    const button = document.getElementById("tab-" + tab);
    const on = tab === name;
    button.setAttribute("aria-selected", on ? "true" : "false");
    button.tabIndex = on ? 0 : -1;
    document.getElementById("panel-" + tab).hidden = !on;
  });
  return load === false ? Promise.resolve() : loadTab(name);
}

export function initTabs(config) {
  urls = config.urls;
  TABS.forEach((tab, i) => {
    const button = document.getElementById("tab-" + tab);
    button.addEventListener("click", () => showTab(tab, true));
    button.addEventListener("keydown", (evt) => {
      if (evt.key !== "ArrowRight" && evt.key !== "ArrowLeft") return;
      const next = TABS[(i + (evt.key === "ArrowRight" ? 1 : TABS.length - 1)) % TABS.length];
      document.getElementById("tab-" + next).focus();
      showTab(next, true);
    });
  });
}
