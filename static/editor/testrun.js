/*
 * Test runs on the canvas: follow a dry run's events and highlight its path live (the step
 * running, the branch taken, the branches not taken greyed with their reason on hover), then
 * show the run's result; and show the branch coverage of the recipe tests.
 *
 * Events are polled from GET /api/runs/{id}/events?after=N (DESIGN.md §5) every 300 ms.
 */
(function () {
  "use strict";

  var app = window.branchline;
  var config = JSON.parse(document.getElementById("editor-config").textContent);
  var urls = config.urls;
  var cy = app.cy;
  var POLL_MS = 300;
  var tracking = null;

  function clearHighlight() {
    cy.elements().removeClass("run-visited run-failed run-current run-taken run-lost");
    cy.edges().removeData("runReason");
    document.getElementById("edge-tip").hidden = true;
  }
  app.clearRunHighlight = clearHighlight;

  function status(text) {
    var live = document.getElementById("testrun-live");
    if (live) live.textContent = text;
  }

  function handle(run, event) {
    var data = event.data || {};
    var node, edge;
    switch (event.type) {
      case "step.started":
        cy.nodes(".run-current").removeClass("run-current");
        node = app.nodeByKey(data.step);
        if (node.nonempty()) node.addClass("run-current run-visited");
        status("Running " + (data.name || data.step) + "…");
        break;
      case "step.finished":
        node = app.nodeByKey(data.step);
        if (node.nonempty()) {
          node.removeClass("run-current");
          if (data.status === "failed" || data.status === "timed_out") node.addClass("run-failed");
        }
        break;
      case "branch.evaluated":
        edge = app.edgeByName(data.step, data.branch);
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
          edge = app.edgeByName(data.step, data.branch);
          if (edge) edge.removeClass("run-lost").addClass("run-taken");
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

  function poll(run) {
    if (tracking !== run) return;
    fetch(urls.events.replace("{id}", run.id) + "?after=" + run.after, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    }).then(function (response) {
      if (!response.ok) throw new Error("events " + response.status);
      return response.json();
    }).then(function (events) {
      if (tracking !== run) return;
      events.forEach(function (event) {
        run.after = Math.max(run.after, event.seq);
        handle(run, event);
      });
      if (run.finished) {
        htmx.ajax("GET", urls.testrunResult + "?run=" + run.id, {
          source: "#testrun-result", target: "#testrun-result", swap: "innerHTML",
        }).then(function () {
          app.testRunFinished = run.id;
          var result = document.getElementById("testrun-result");
          if (result) result.scrollIntoView({ block: "nearest" });
        });
      } else {
        setTimeout(function () { poll(run); }, POLL_MS);
      }
    }).catch(function () {
      run.failures += 1;
      if (run.failures < 20) setTimeout(function () { poll(run); }, POLL_MS * 3);
      else status("Lost contact with the run; reload to see its result.");
    });
  }

  function track(id) {
    clearHighlight();
    var run = { id: id, after: 0, finished: false, failures: 0 };
    tracking = run;
    app.testRunFinished = null;
    poll(run);
  }

  document.body.addEventListener("htmx:afterSwap", function (evt) {
    var target = evt.detail.target;
    if (!target) return;
    var live = target.querySelector && target.querySelector("#testrun-live[data-run]");
    if (live && live.getAttribute("data-tracked") !== "1") {
      live.setAttribute("data-tracked", "1");
      live.scrollIntoView({ block: "nearest" });
      track(live.getAttribute("data-run"));
    }
    if (target.id === "panel-tests" || target.id === "tests" || target.querySelector && target.querySelector("#tests")) {
      if (showingCoverage) showCoverage(true);
    }
  });

  // Coverage: mark the branches no test takes (and those some test takes).
  var showingCoverage = false;

  function showCoverage(on) {
    cy.edges().removeClass("uncovered covered");
    showingCoverage = on;
    var button = document.getElementById("btn-show-coverage");
    if (button) button.setAttribute("aria-pressed", on ? "true" : "false");
    var script = document.getElementById("coverage-data");
    if (!on || !script) return;
    var data = JSON.parse(script.textContent);
    data.untaken.forEach(function (pair) {
      var edge = app.edgeByName(pair[0], pair[1]);
      if (edge) edge.addClass("uncovered");
    });
    data.taken.forEach(function (pair) {
      var edge = app.edgeByName(pair[0], pair[1]);
      if (edge) edge.addClass("covered");
    });
  }
  app.showCoverage = showCoverage;

  document.addEventListener("click", function (evt) {
    if (evt.target.closest("#btn-show-coverage")) {
      clearHighlight();
      showCoverage(!showingCoverage);
    }
  });
})();
