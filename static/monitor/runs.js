/*
 * runs.js: live status badges on the run list.
 *
 * Follows /ws/runs/ (the user's own runs, plus the active runs on the page it asks to watch)
 * and updates the badges; a run the page does not show yet, or one that finished, reloads the
 * table from the server so new rows, outcomes and finish times appear, with the runs ticked
 * for comparison still ticked.
 */
import { loadPartial } from "./partials.js";
import { LiveSocket } from "./socket.js";

const labels = JSON.parse(document.getElementById("run-status-labels").textContent);
const TERMINAL = ["succeeded", "failed", "cancelled", "ended"];
let reloadTimer = null;

function table() {
  return document.getElementById("runs-table");
}

function activeRuns() {
  return [...table().querySelectorAll("[data-run-status][data-active]")].map((el) =>
    Number(el.dataset.runStatus),
  );
}

// The runs ticked for comparison (boxes of the "compare-runs" form): a reloaded table has new
// boxes, which are ticked again from here.
const tickedRuns = new Set(
  [...table().querySelectorAll('input[name="run"]:checked')].map((box) => box.value),
);
document.addEventListener("change", (event) => {
  const box = event.target;
  if (!(box instanceof HTMLInputElement) || box.name !== "run" || !table().contains(box)) return;
  if (box.checked) tickedRuns.add(box.value);
  else tickedRuns.delete(box.value);
});

function tickAgain() {
  tickedRuns.forEach((value) => {
    const box = table().querySelector(`input[name="run"][value="${CSS.escape(value)}"]`);
    if (box) box.checked = true;
  });
}

function reload() {
  window.clearTimeout(reloadTimer);
  reloadTimer = window.setTimeout(() => {
    loadPartial(window.location.href, "#runs-table", "outerHTML").then((swapped) => {
      if (!swapped) return;
      tickAgain();
      socket.send({ watch: activeRuns() });
    });
  }, 300);
}

const socket = new LiveSocket("/ws/runs/", {
  onOpen(live) {
    live.send({ watch: activeRuns() });
  },
  onMessage(message) {
    if (message.type !== "status") return;
    const badge = table().querySelector(`[data-run-status="${CSS.escape(String(message.run))}"]`);
    if (!badge) {
      reload();
      return;
    }
    badge.className = `badge ${message.status}`;
    badge.textContent = labels[message.status] || message.status;
    if (TERMINAL.includes(message.status)) reload();
  },
});
socket.open();
