/*
 * testrun.js: test runs on the canvas: run the recipe as the canvas shows it (the test-run
 * form posts the current document, saved or not), follow the dry run's events and highlight its
 * path live (the step running, the branch taken, the branches not taken greyed with their reason
 * on hover), then show the run's result; and show the branch coverage of the recipe tests.
 *
 * Events arrive over the run's websocket (/ws/runs/{id}/?after=N, as on the run monitor). Only
 * if the socket fails are they polled from GET /api/runs/{id}/events?after=N every 300 ms, from
 * the last event the socket delivered.
 */
import { RunSocket } from "../monitor/socket.js";
import { edgeByName, nodeByKey } from "./canvas.js";
import * as store from "./store.js";

const POLL_MS = 300;
let urls = {};
let tracking = null;
let finishedRun = null;
let showingCoverage = false;

/** Return the id of the test run whose result is shown, once it finished; else null. */
export function testRunFinished() {
  return finishedRun;
}

function clearHighlight() {
  store.graph().elements().removeClass("run-visited run-failed run-current run-taken run-lost");
  store.graph().edges().removeData("runReason");
  document.getElementById("edge-tip").hidden = true;
}

function status(text) {
  const live = document.getElementById("testrun-live");
  if (live) live.textContent = text;
}

function handle(run, event) {
  const cy = store.graph();
  const data = event.data || {};
  let node;
  let edge;
  switch (event.type) {
    case "step.started":
      cy.nodes(".run-current").removeClass("run-current");
      node = nodeByKey(data.step);
      if (node.nonempty()) node.addClass("run-current run-visited");
      status("Running " + (data.name || data.step) + "…");
      break;
    case "step.finished":
      node = nodeByKey(data.step);
      if (node.nonempty()) {
        node.removeClass("run-current");
        if (data.status === "failed" || data.status === "timed_out") node.addClass("run-failed");
      }
      break;
    case "branch.evaluated":
      edge = edgeByName(data.step, data.branch);
      if (!edge) break;
      if (data.taken) {
        edge.removeClass("run-lost").addClass("run-taken");
      } else if (!edge.hasClass("run-taken")) {
        edge.addClass("run-lost");
      }
      edge.data("runReason", (data.taken ? "taken: " : data.matched ? "matched, not taken: " : "not taken: ") + data.reason);
      break;
    case "branch.taken":
      if (data.branch) {
        edge = edgeByName(data.step, data.branch);
        if (edge) edge.removeClass("run-lost").addClass("run-taken");
      } else {
        // No branch taken: the run went on to the next step in order, the dashed arrow.
        node = nodeByKey(data.step);
        if (node.nonempty()) node.outgoers('edge[kind = "sequence"]').addClass("run-taken");
      }
      break;
    case "human_task.created":
      status("Waiting for a reviewer…");
      break;
    case "run.finished":
      run.finished = true;
      cy.nodes(".run-current").removeClass("run-current");
      status("Run #" + run.id + " " + (data.status || "finished") + (data.error ? ": " + data.error : "") + ".");
      break;
    default:
      break;
  }
}

function showResult(run) {
  htmx.ajax("GET", urls.testrunResult + "?run=" + run.id, {
    source: "#testrun-result", target: "#testrun-result", swap: "innerHTML",
  }).then(() => {
    finishedRun = run.id;
    const result = document.getElementById("testrun-result");
    if (result) result.scrollIntoView({ block: "nearest" });
  });
}

function poll(run) {
  if (tracking !== run) return;
  run.transport = "polling";
  fetch(urls.events.replace("{id}", run.id) + "?after=" + run.after, {
    credentials: "same-origin",
    headers: { Accept: "application/json" },
  }).then((response) => {
    if (!response.ok) throw new Error("events " + response.status);
    return response.json();
  }).then((events) => {
    if (tracking !== run) return;
    receive(run, events);
    if (!run.finished) setTimeout(() => poll(run), POLL_MS);
  }).catch(() => {
    run.failures += 1;
    if (run.failures < 20) setTimeout(() => poll(run), POLL_MS * 3);
    else status("Lost contact with the run; reload to see its result.");
  });
}

function receive(run, events) {
  if (tracking !== run || run.finished) return;
  events.forEach((event) => {
    run.after = Math.max(run.after, event.seq);
    handle(run, event);
  });
  if (run.finished) {
    if (run.socket) run.socket.close();
    showResult(run);
  }
}

/** Follow the run over its websocket; poll the events API instead once the socket fails. */
function follow(run) {
  if (typeof WebSocket === "undefined") {
    poll(run);
    return;
  }
  run.transport = "websocket";
  run.socket = new RunSocket(run.id, {
    after: run.after,
    onEvents: (events) => receive(run, events),
    onState(state) {
      if (state !== "reconnecting" || tracking !== run || run.finished) return;
      // The handshake was refused or the connection dropped: poll from the last event seen.
      run.socket.close();
      run.socket = null;
      poll(run);
    },
  }).open();
}

function stopTracking() {
  if (tracking && tracking.socket) tracking.socket.close();
  tracking = null;
}

function track(id) {
  clearHighlight();
  stopTracking();
  const run = { id: id, after: 0, finished: false, failures: 0, socket: null, transport: "" };
  tracking = run;
  finishedRun = null;
  follow(run);
}

/** Return how the test run being followed gets its events: "websocket", "polling" or "". */
export function testRunTransport() {
  return tracking ? tracking.transport : "";
}

// Coverage: mark the branches no test takes (and those some test takes).
function showCoverage(on) {
  store.graph().edges().removeClass("uncovered covered");
  showingCoverage = on;
  const button = document.getElementById("btn-show-coverage");
  if (button) button.setAttribute("aria-pressed", on ? "true" : "false");
  const script = document.getElementById("coverage-data");
  if (!on || !script) return;
  const data = JSON.parse(script.textContent);
  data.untaken.forEach((pair) => {
    const edge = edgeByName(pair[0], pair[1]);
    if (edge) edge.addClass("uncovered");
  });
  data.taken.forEach((pair) => {
    const edge = edgeByName(pair[0], pair[1]);
    if (edge) edge.addClass("covered");
  });
}

export function initTestRun(config) {
  urls = config.urls;
  // A test run runs what the canvas shows: the form's post carries the current document.
  document.body.addEventListener("htmx:configRequest", (evt) => {
    const elt = evt.detail.elt;
    if (elt && elt.closest && elt.closest("[data-testrun-form]")) {
      evt.detail.parameters.document = JSON.stringify(store.current().document);
    }
  });
  document.body.addEventListener("htmx:afterSwap", (evt) => {
    const target = evt.detail.target;
    if (!target) return;
    const live = target.querySelector && target.querySelector("#testrun-live[data-run]");
    if (live && live.getAttribute("data-tracked") !== "1") {
      live.setAttribute("data-tracked", "1");
      live.scrollIntoView({ block: "nearest" });
      track(live.getAttribute("data-run"));
    }
    if (target.id === "panel-tests" || target.id === "tests" || (target.querySelector && target.querySelector("#tests"))) {
      if (showingCoverage) showCoverage(true);
    }
  });
  document.addEventListener("click", (evt) => {
    if (evt.target.closest("#btn-show-coverage")) {
      clearHighlight();
      showCoverage(!showingCoverage);
    }
  });
}
