/*
 * tabs.js: the side panel's tabs (Properties, Recipe, Test run, Tests, Versions); a tab's
 * content is loaded from the server when it is shown.
 */
import * as store from "./store.js";

const TABS = ["properties", "recipe", "testrun", "tests", "versions"];
let urls = {};
let testrunStale = false;

function loadTab(name) {
  if (name === "recipe") {
    const values = { document: JSON.stringify(store.current().document) };
    return htmx.ajax("POST", urls.recipePanel, { source: "#panel-recipe", target: "#panel-recipe", swap: "innerHTML", values: values });
  }
  // The test-run form keeps what was typed, unless a new version was published since.
  if (name === "testrun" && (testrunStale || !document.querySelector("#panel-testrun form"))) {
    testrunStale = false;
    return htmx.ajax("POST", urls.testrunPanel, { source: "#panel-testrun", target: "#panel-testrun", swap: "innerHTML" });
  }
  if (name === "tests") return htmx.ajax("GET", urls.tests, { source: "#panel-tests", target: "#panel-tests", swap: "innerHTML" });
  if (name === "versions") return htmx.ajax("GET", urls.versions, { source: "#panel-versions", target: "#panel-versions", swap: "innerHTML" });
  return Promise.resolve();
}

/** Show the tab `name`, loading its content unless `load` is false. */
export function showTab(name, load) {
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
  document.body.addEventListener("htmx:afterSwap", () => {
    if (document.querySelector("#panel-versions .applied")) testrunStale = true;
  });
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
