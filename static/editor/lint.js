/*
 * lint.js: the problems panel. After each edit the document is checked by the server, which
 * answers with the panel and the step list; the steps and branches with problems are marked
 * on the canvas. One check runs at a time; an edit during a check asks for one more.
 */
import { elementForPath } from "./recipe-graph.js";
import * as store from "./store.js";

let checkUrl = "";
let checkTimer = null;
let checking = false;
let checkAgain = false;
let checkedElements = {};

/** Return the path → element id map of the document as it was when last checked. */
export function lintElements() {
  return checkedElements;
}

/** Tell whether a check is waiting to run or running. */
export function pending() {
  return checkTimer !== null || checking;
}

/** Check the document once the current task is done (edits made in it are checked together). */
export function scheduleCheck() {
  clearTimeout(checkTimer);
  checkTimer = setTimeout(runCheck, 0);
}

function runCheck() {
  checkTimer = null;
  if (checking) {
    checkAgain = true;
    return;
  }
  checking = true;
  const current = store.current();
  htmx.ajax("POST", checkUrl, {
    source: "#lint",
    target: "#lint",
    swap: "innerHTML",
    values: { document: JSON.stringify(current.document) },
  }).then(() => {
    checkedElements = current.elements;
    markProblems();
  }).finally(() => {
    checking = false;
    if (checkAgain) {
      checkAgain = false;
      runCheck();
    }
  });
}

function markProblems() {
  const cy = store.graph();
  cy.elements().removeClass("has-error has-warning");
  document.querySelectorAll("#lint .problem").forEach((li) => {
    const link = li.querySelector("[data-path]");
    const id = elementForPath(checkedElements, link && link.getAttribute("data-path"));
    if (!id) return;
    cy.getElementById(id).addClass(li.classList.contains("error") ? "has-error" : "has-warning");
  });
}

export function initLint(config) {
  checkUrl = config.urls.check;
  store.subscribe((event) => {
    if (event === "edited") scheduleCheck();
  });
}
