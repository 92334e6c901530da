/*
 * reviews.js: the reviewers' live view, loaded on every page for a signed-in user.
 *
 * Follows /ws/reviews/ and keeps the open-task count in the navigation and the page title: every
 * message carries the exact count. On the inbox page, which shows the oldest open tasks a page
 * at a time, it also
 * - adds the card of a task that appears (rendered by the server) when the page shows every
 *   open task, and otherwise offers "Load more", which loads the tasks after the last card;
 * - removes the card of a task that someone else decided, with a short notice saying so;
 * - reconciles the cards with a snapshot (the count and the first page, sent on connect and
 *   after missed changes): a card the snapshot proves closed goes, a task of its first page
 *   comes, and cards past the first page stay as they are.
 * Cards stay in the inbox's order (`data-order`), and a card the user is deciding on or has
 * decided stays.
 */
import { loadPartial } from "./partials.js";
import { LiveSocket } from "./socket.js";

const counters = document.querySelectorAll("[data-inbox-count]");
const totals = document.querySelectorAll("[data-inbox-total]");
const list = document.getElementById("inbox-tasks");
const empty = document.getElementById("inbox-empty");
const notices = document.getElementById("inbox-notices");
const baseTitle = document.title.replace(/^\(\d+\) /, "");
const pageSize = list ? Number(list.dataset.pageSize) || 25 : 0;
// A page opened at a cursor (the no-script "Load more") starts past the oldest tasks: a snapshot
// or a new task says nothing of what it shows.
const fromOldest = list ? list.dataset.fromOldest === "true" : false;
const MAX_NOTICES = 5;
// Cards of tasks waiting for a decision here: open, or decided by this user on the way.
const WAITING = '.task-card:is([data-status="open"], [data-status="deciding"])';

let count = null; // the open tasks of the user's groups, as the last message said
const closedPayloads = new Map(); // id -> the payload that closed it
const fetching = new Set();

function showCount() {
  counters.forEach((el) => {
    el.textContent = String(count);
    el.hidden = count === 0;
  });
  totals.forEach((el) => {
    el.textContent = String(count);
  });
  document.title = (count ? `(${count}) ` : "") + baseTitle;
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

const cardOf = (id) => document.getElementById(`task-${id}`);
const cards = () => [...list.querySelectorAll(".task-card")];
const waiting = () => list.querySelectorAll(WAITING).length;
const moreRow = document.getElementById("inbox-more-row");

function cardUrl(id) {
  return list.dataset.cardUrl.replace(/0\/$/, `${encodeURIComponent(id)}/`);
}

function moreUrl() {
  const last = cards().at(-1);
  const query = last && last.dataset.cursor ? `?cursor=${encodeURIComponent(last.dataset.cursor)}` : "";
  return `${window.location.pathname}${query}`;
}

function refresh() {
  if (!list) return;
  if (empty) empty.hidden = list.querySelector(".task-card") !== null;
  // More tasks are open than the page shows waiting: they come after its last card.
  if (moreRow && count !== null) moreRow.hidden = count <= waiting() + fetching.size;
}

function removeClosed(card) {
  const id = Number(card.dataset.taskId);
  card.remove();
  notice(closedText(id, closedPayloads.get(id)));
}

// Put a card the server rendered where the inbox's order puts it, unless the page has it.
function place(card) {
  const id = Number(card.dataset.taskId);
  // The list comes before the holders: the first element with the id is the page's card.
  const shown = cardOf(id);
  if (card.dataset.status !== "open" || closedPayloads.has(id) || shown !== card) return;
  const next = cards().find((other) => other.dataset.order > card.dataset.order);
  list.insertBefore(card, next || null);
}

// Load cards (one task's, or a page of them) into a hidden holder, then place each.
async function loadCards(url) {
  const holder = document.createElement("div");
  holder.hidden = true;
  list.after(holder);
  try {
    if (await loadPartial(url, holder, "innerHTML")) {
      holder.querySelectorAll(".task-card").forEach(place);
    }
  } finally {
    holder.remove();
    refresh();
  }
}

function addCard(id) {
  if (fetching.has(id) || cardOf(id)) return;
  fetching.add(id);
  loadCards(cardUrl(id))
    .catch(() => false)
    .finally(() => {
      fetching.delete(id);
      refresh();
    });
}

function applySnapshot(tasks) {
  const ids = new Set(tasks.map((task) => task.id));
  ids.forEach((id) => closedPayloads.delete(id)); // open now, whatever was heard before
  // The snapshot covers the list up to its last task shown, or all of it if it holds every
  // open task; an open card in that stretch that it does not hold was closed meanwhile.
  const whole = tasks.length >= count;
  let end = null;
  tasks.forEach((task) => {
    end = cardOf(task.id) || end;
  });
  for (const card of cards()) {
    if (!whole && end === null) break;
    if (card.dataset.status === "open" && !ids.has(Number(card.dataset.taskId))) removeClosed(card);
    if (card === end && !whole) break;
  }
  tasks.forEach((task) => addCard(task.id));
}

function applyChange(kind, task) {
  if (kind === "closed") {
    closedPayloads.set(task.id, task);
    // A card this user is deciding on shows the outcome soon (data-status="deciding"): it stays.
    const card = cardOf(task.id);
    if (card && card.dataset.status === "open") removeClosed(card);
  } else if (kind === "created" && task.status === "open") {
    closedPayloads.delete(task.id);
    // Shown only if the page shows every other open task (no gap before it) and is not long.
    const shown = waiting();
    if (fromOldest && shown >= count - 1 && shown < pageSize) addCard(task.id);
  }
}

const socket = new LiveSocket("/ws/reviews/", {
  onMessage(message) {
    if (message.type !== "tasks" && message.type !== "task") return;
    count = message.count;
    showCount();
    if (!list) return;
    if (message.type === "tasks") {
      if (fromOldest) applySnapshot(message.tasks);
    } else {
      applyChange(message.kind, message.task);
    }
    refresh();
  },
});
socket.open();

if (list) {
  document.addEventListener("click", (event) => {
    const more = event.target.closest && event.target.closest("#inbox-more");
    if (!more) return;
    event.preventDefault();
    more.setAttribute("aria-busy", "true");
    loadCards(moreUrl())
      .catch(() => false)
      .finally(() => more.removeAttribute("aria-busy"));
  });
}

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
document.body.addEventListener("htmx:afterSwap", refresh);

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
    // The task may have closed meanwhile: its push came while the decision was on its way.
    if (closedPayloads.has(Number(card.dataset.taskId))) removeClosed(card);
    refresh();
  }
});
