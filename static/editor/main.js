/*
 * main.js: the recipe editor page: draws the draft on the canvas, hands it to the store (the
 * one owner of the editor's state) and sets up the parts that read and change it: canvas,
 * branch drawing, side panels and tabs, tool bar, keyboard, lint, saving and test runs.
 *
 * `window.branchline` lets tests and benchmarks drive the page and wait for it.
 */
import { toElements } from "./recipe-graph.js";
import { createCanvas, edgeByName, initCanvas, initNavigator, nodeByKey, placed } from "./canvas.js";
import { initClipboard } from "./clipboard.js";
import { initConnect } from "./connect.js";
import { initContextMenu } from "./context-menu.js";
import { initPalette } from "./palette.js";
import { initStepActions } from "./step-actions.js";
import { initBranchOrder } from "./branch-order.js";
import { initKeyboard } from "./keyboard.js";
import { initLint, pending as lintPending, scheduleCheck } from "./lint.js";
import { initOutline } from "./outline.js";
import { initPanels, panelPending } from "./panels.js";
import { inFlight as saveInFlight, initSaving, save } from "./saving.js";
import * as store from "./store.js";
import { initTabs } from "./tabs.js";
import { initTestRun, testRunFinished, testRunTransport } from "./testrun.js";
import { initRunsOverlay } from "./runs-overlay.js";
import { initToolbar } from "./toolbar.js";

performance.mark("editor-start");
const config = JSON.parse(document.getElementById("editor-config").textContent);
const built = toElements(JSON.parse(document.getElementById("recipe-document").textContent));
const cy = createCanvas(built);
store.init({ graph: cy, meta: built.meta, revision: config.revision });
let ready = false;

const title = document.getElementById("recipe-title");
store.subscribe((event) => {
  if (event === "change") title.textContent = store.metaCopy().name || config.slug;
});
initCanvas();
initConnect();
initTabs(config);
initLint(config);
initPanels(config);
initBranchOrder();
initOutline();
initToolbar(config);
initClipboard(config);
initPalette();
initContextMenu();
initStepActions();
initKeyboard();
initSaving(config);
initTestRun(config);
initRunsOverlay(config);

window.branchline = {
  cy: cy,
  get ready() { return ready; },
  get dirty() { return store.isDirty(); },
  get testRunFinished() { return testRunFinished(); },
  get testRunTransport() { return testRunTransport(); },
  meta: () => store.metaCopy(),
  nodeByKey: nodeByKey,
  edgeByName: edgeByName,
  save: save,
  // Nothing is waiting to happen: no edit still to be marked and checked or typed in a panel and
  // not applied yet, no check, save or panel request in flight, and htmx has wired up what it swapped in (it does so when the swap
  // settles, a moment later: until then a form in it would submit as a plain form). Tests wait
  // for this before acting on a layout that must hold still or on controls just loaded.
  settled: () => !store.editing() && !lintPending() && !saveInFlight() && !panelPending() &&
    !document.querySelector(".htmx-request, .htmx-settling"),
};

// Ready once the graph is placed (canvas.js marks `editor-laid-out`) and drawn: two frames.
placed().then(() => cy.ready(() => {
  requestAnimationFrame(() => {
    requestAnimationFrame(() => {
      ready = true;
      document.documentElement.setAttribute("data-editor-ready", "1");
      performance.mark("editor-ready");
      scheduleCheck();
      setTimeout(() => initNavigator(cy), 50);
    });
  });
}));
