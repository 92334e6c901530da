/*
 * reviews.js: the reviewers' live view, loaded on every page for a signed-in user.
 *
 * Follows /ws/reviews/ and keeps the open-task count in the navigation and the page title.
 * On the inbox page it also adds the card of a task that appears (rendered by the server) and
 * removes the card of a task that someone else decided, with a short notice saying so.
 */
import { loadPartial } from "./partials.js";
import { LiveSocket } from "./socket.js";

const counters = document.querySelectorAll("[data-inbox-count]");
const list = document.getElementById("inbox-tasks");
const empty = document.getElementById("inbox-empty");
const notices = document.getElementById("inbox-notices");
const baseTitle = document.title.replace(/^\(\d+\) /, "");
const MAX_NOTICES = 5;

const openTasks = new Map(); // id -> task payload
const closedPayloads = new Map(); // id -> the payload that closed it
const fetching = new Set();

function showCount() {
  const n = openTasks.size;
  counters.forEach((el) => {
    el.textContent = String(n);
    el.hidden = n === 0;
  });
  document.title = (n ? `(${n}) ` : "") + baseTitle;
}

function notice(text) {
  if (!notices) return;
  const p = document.createElement("p");
  p.className = "notice";
  p.textContent = text;
  notices.prepend(p);
  while (notices.children.length > MAX_NOTICES) notices.lastElementChild.remove();
}

function closedText(id, task) {
  if (!task) return `Task ${id} is no longer open.`;
  const where = task.step ? ` (${task.step}, run ${task.run})` : "";
  if (task.status === "decided") {
    return `Task ${id}${where} was decided by ${task.decided_by || "a dry-run script"}: ${task.decision}.`;
  }
  if (task.status === "open") return `Task ${id}${where} was escalated to ${task.group}.`;
  if (task.status === "timed_out") return `Task ${id}${where} timed out.`;
  return `Task ${id}${where} was closed: its run stopped.`;
}

function cardUrl(id) {
  return list.dataset.cardUrl.replace(/0\/$/, `${encodeURIComponent(id)}/`);
}

function reconcile() {
  if (!list) return;
  // Open cards whose task is gone: someone else decided, or the run stopped. A card this user
  // decided shows its outcome (data-status="decided") and stays.
  list.querySelectorAll('.task-card[data-status="open"]').forEach((card) => {
    const id = Number(card.dataset.taskId);
    if (openTasks.has(id) || fetching.has(id)) return;
    card.remove();
    notice(closedText(id, closedPayloads.get(id)));
  });
  openTasks.forEach((task, id) => {
    if (fetching.has(id) || document.getElementById(`task-${id}`)) return;
    fetching.add(id);
    loadPartial(cardUrl(id), list, "beforeend")
      .catch(() => false)
      .finally(() => {
        fetching.delete(id);
        reconcile();
      });
  });
  if (empty) empty.hidden = list.querySelector(".task-card") !== null;
}

function update() {
  showCount();
  reconcile();
}

const socket = new LiveSocket("/ws/reviews/", {
  onMessage(message) {
    if (message.type === "tasks") {
      openTasks.clear();
      message.tasks.forEach((task) => openTasks.set(task.id, task));
    } else if (message.type === "task") {
      const task = message.task;
      if (message.kind === "created" && task.status === "open") {
        openTasks.set(task.id, task);
      } else if (message.kind === "closed") {
        openTasks.delete(task.id);
        closedPayloads.set(task.id, task);
      }
    } else {
      return;
    }
    update();
  },
});
socket.open();

// A decision on a task that closed meanwhile (409), by someone outside its group (403) or with a
// missing comment (400) answers with the card saying why: show it rather than drop it.
document.body.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  if (target && target.classList && target.classList.contains("task-card")) {
    if ([400, 403, 409].includes(event.detail.xhr.status)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  }
});
document.body.addEventListener("htmx:afterSwap", () => {
  if (list && empty) empty.hidden = list.querySelector(".task-card") !== null;
});

// While this user's decision is on its way, the task's "closed" push may arrive first: keep the
// card (it is about to show the outcome) instead of removing it as decided by someone else.
document.body.addEventListener("htmx:beforeRequest", (event) => {
  const form = event.detail.elt;
  if (form.matches && form.matches("form.decide")) form.closest(".task-card").dataset.status = "deciding";
});
document.body.addEventListener("htmx:afterRequest", (event) => {
  const form = event.detail.elt;
  if (!form.matches || !form.matches("form.decide") || !form.isConnected) return;
  const card = form.closest(".task-card");
  if (card && card.dataset.status === "deciding") {
    card.dataset.status = "open";
    reconcile();
  }
});
