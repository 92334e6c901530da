/*
 * reviews.js: the reviewers' live view, loaded on every page for a signed-in user.
 *
 * Follows /ws/reviews/ and keeps the open-task count in the navigation and the page title: every
 * message carries the exact count. On the inbox page (a review queue: the list of tasks on the
 * left, the selected task's card on the right, one column on a phone), which shows the open
 * tasks of a view (filters, sort, search) a page at a time, it also
 * - builds the list's rows from the cards (each card carries its row's facts as data-*: run,
 *   step name, a snippet of what is to be decided), keeps one card selected (click a row, or
 *   j/k), and triages by keyboard: a/r/v decide, c or / focus the comment, Esc leaves it, m
 *   claims or lets go;
 * - holds a decision made with a single key for the undo window the page names
 *   (data-undo-ms): it is sent when the window closes, taken back with Undo or u, and sent at
 *   once if the page is left or hidden meanwhile (a beacon), so that none is lost unseen;
 * - collapses the filters on a phone (they open with their summary);
 * - adds the card of a task that appears (rendered by the server) when the page shows the
 *   whole queue oldest first and every open task, and otherwise offers "Load more", which
 *   loads the tasks after the last card (with the view's filters);
 * - removes the card of a task that was decided: by someone else, with a notice saying so; by
 *   this user, once their decision is recorded, moving to the next task;
 * - shows who is on a task as claims change (the server renders the claim line);
 * - keeps the due badges (overdue, due soon) current as time passes;
 * - reconciles the cards with a snapshot (the count and the first page, sent on connect and
 *   after missed changes): a card the snapshot proves closed goes, a task of its first page
 *   comes, and cards past the first page stay as they are.
 * Cards stay in the inbox's order (`data-order`), and a card the user is deciding on stays.
 */
import { loadPartial } from "./partials.js";
import { LiveSocket } from "./socket.js";

const counters = document.querySelectorAll("[data-inbox-count]");
const totals = document.querySelectorAll("[data-inbox-total]");
const plurals = document.querySelectorAll("[data-inbox-plural]");
const list = document.getElementById("inbox-tasks");
const empty = document.getElementById("inbox-empty");
const notices = document.getElementById("inbox-notices");
const baseTitle = document.title.replace(/^\(\d+\) /, "");
const pageSize = list ? Number(list.dataset.pageSize) || 25 : 0;
// A page opened at a cursor (the no-script "Load more") starts past the oldest tasks: a snapshot
// or a new task says nothing of what it shows.
const fromOldest = list ? list.dataset.fromOldest === "true" : false;
const MAX_NOTICES = 5;
// A view narrowed by filters, a sort or a search: the socket's snapshot and new tasks are of the
// whole queue, oldest first, so they say nothing of what it shows (closed tasks still go).
const narrowed = list ? list.dataset.narrowed === "true" : false;
const dueSoonMs = list ? Number(list.dataset.dueSoonMs) || 3600000 : 0;
const undoMs = list ? Number(list.dataset.undoMs) || 5000 : 0;
const PHONE = window.matchMedia("(max-width: 760px)");
const layout = document.getElementById("inbox-layout");
const rows = document.getElementById("inbox-list");
let selectedId = null; // the task whose card the detail pane shows
let pageMore = null; // in a narrowed view: whether the last page loaded said more follow
// Cards of tasks waiting for a decision here: open, or decided by this user on the way.
const WAITING = '.task-card:is([data-status="open"], [data-status="deciding"])';

let count = null; // the open tasks of the user's groups, as the last message said
const closedPayloads = new Map(); // id -> the payload that closed it
// Decisions made with a key, not sent yet: task id -> {option, timer, ticker, notice, until},
// oldest first.
const held = new Map();
const sending = new Map(); // task id → the option sent, until its answer comes
const fetching = new Set();

function showCount() {
  counters.forEach((el) => {
    el.textContent = String(count);
    el.hidden = count === 0;
  });
  totals.forEach((el) => {
    el.textContent = String(count);
  });
  plurals.forEach((el) => {
    el.textContent = count === 1 ? "" : "s";
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
  // The view's filters, sort and search stay; the page starts after the last card.
  const params = new URLSearchParams(window.location.search);
  params.delete("cursor");
  const last = cards().at(-1);
  if (last && last.dataset.cursor) params.set("cursor", last.dataset.cursor);
  const query = params.toString();
  return `${window.location.pathname}${query ? `?${query}` : ""}`;
}

function claimUrl(id) {
  return list.dataset.claimUrl.replace(/0\/claim\/$/, `${encodeURIComponent(id)}/claim/`);
}

// Someone claimed a task or let it go: the server renders the claim line as this user sees it.
function refreshClaim(task) {
  const card = cardOf(task.id);
  const form = card && card.querySelector("form.claim");
  if (!form || card.dataset.status !== "open") return;
  card.dataset.claimedBy = task.claimed_by || "";
  loadPartial(claimUrl(task.id), form, "outerHTML")
    .catch(() => false)
    .finally(refresh);
}

function refresh() {
  if (!list) return;
  if (empty) empty.hidden = list.querySelector(".task-card") !== null;
  if (narrowed) {
    // Only the server knows whether more match: the last page loaded said.
    if (moreRow && pageMore !== null) moreRow.hidden = !pageMore;
  } else if (moreRow && count !== null) {
    // More tasks are open than the page shows waiting: they come after its last card.
    moreRow.hidden = count <= waiting() + fetching.size;
  }
  renderRows();
}

// --- the list of rows and the selected card ---------------------------------------------------

function dueState(card) {
  const due = Date.parse(card.dataset.dueAt || "");
  if (Number.isNaN(due) || card.dataset.status !== "open") return "";
  const left = due - Date.now();
  if (left <= 0) return "overdue";
  return left <= dueSoonMs ? "soon" : "";
}

function badge(state) {
  const span = document.createElement("span");
  span.className = `badge due-${state}`;
  span.textContent = state === "overdue" ? "Overdue" : "Due soon";
  return span;
}

function span(className, text) {
  const el = document.createElement("span");
  el.className = className;
  el.textContent = text;
  return el;
}

function claimOf(card) {
  const form = card.querySelector("form.claim");
  const who = form ? form.dataset.claimedBy : card.dataset.claimedBy;
  if (!who) return "";
  return form && form.dataset.mine === "true" ? "You are on it" : `${who} is on it`;
}

function rowFor(card) {
  const id = card.dataset.taskId;
  const li = document.createElement("li");
  li.className = "task-row";
  li.dataset.taskId = id;
  const link = document.createElement("a");
  link.href = `#task-${id}`;
  link.id = `row-${id}`;
  link.append(span("row-title", card.dataset.title || `Task ${id}`));
  const run = card.dataset.run ? `run #${card.dataset.run} · ` : "";
  link.append(span("row-meta", `${run}${card.dataset.group || ""} · asked ${card.dataset.asked || ""}`));
  if (card.dataset.snippet) link.append(span("row-snippet", card.dataset.snippet));
  const flags = span("row-flags", "");
  const holding = held.get(id);
  if (holding) flags.append(span("badge held", heldText(card, holding)));
  else if (sending.has(id)) flags.append(span("badge held", `${labelOf(card, sending.get(id))}: sending…`));
  const state = dueState(card);
  if (state) flags.append(badge(state));
  if (card.dataset.revised === "true") flags.append(span("badge revised", "Revised"));
  const claim = claimOf(card);
  if (claim) flags.append(span("row-claim", claim));
  if (card.dataset.status !== "open") flags.append(span("badge", "Closed"));
  if (flags.childNodes.length) link.append(flags);
  li.append(link);
  return li;
}

function renderRows() {
  if (!rows) return;
  const active = document.activeElement || document.body;
  const focused = active.closest(".task-row");
  const focusedId = focused ? focused.dataset.taskId : null;
  rows.replaceChildren(...cards().map(rowFor));
  cards().forEach((card) => {
    const holder = card.querySelector("[data-due-badge]");
    const state = dueState(card);
    if (holder && holder.dataset.state !== state) {
      holder.dataset.state = state;
      holder.replaceChildren(...(state ? [badge(state)] : []));
    }
  });
  if (selectedId === null || !cardOf(selectedId)) selectedId = cards().length ? cards()[0].dataset.taskId : null;
  markSelected();
  if (focusedId && !(document.activeElement || document.body).closest(".task-row")) focusRow();
}

function markSelected() {
  cards().forEach((card) => card.classList.toggle("selected", card.dataset.taskId === selectedId));
  if (!rows) return;
  rows.querySelectorAll(".task-row a").forEach((link) => {
    if (link.closest(".task-row").dataset.taskId === selectedId) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  });
}

function focusRow() {
  const row = rows && selectedId !== null ? document.getElementById(`row-${selectedId}`) : null;
  if (!row) return;
  row.focus({ preventScroll: true });
  row.scrollIntoView({ block: "nearest" });
}

function select(id, { focus = false } = {}) {
  if (id === null || id === undefined || !cardOf(id)) return;
  selectedId = String(id);
  markSelected();
  if (focus) focusRow();
  // On a phone the card is below the list: bring it into view when chosen from the list.
  if (PHONE.matches && focus === "card") {
    cardOf(selectedId).scrollIntoView({ block: "start" });
  }
}

function move(step) {
  const all = cards();
  if (!all.length) return;
  const at = all.findIndex((card) => card.dataset.taskId === selectedId);
  const next = all[Math.min(all.length - 1, Math.max(0, at + step))];
  select(next.dataset.taskId, { focus: true });
}

// Take a card off the page; if it was the selected one, select its neighbour (the next one).
function dropCard(card) {
  const all = cards();
  const at = all.indexOf(card);
  const hadFocus = card.contains(document.activeElement) || document.activeElement === document.body;
  const wasSelected = card.dataset.taskId === selectedId;
  card.remove();
  if (wasSelected) {
    const rest = cards();
    const neighbour = rest[Math.min(at, rest.length - 1)];
    selectedId = neighbour ? neighbour.dataset.taskId : null;
  }
  refresh();
  if (wasSelected && hadFocus) focusRow();
}

function removeClosed(card) {
  const id = Number(card.dataset.taskId);
  const dropped = release(card.dataset.taskId);
  dropCard(card);
  const unsent = dropped ? ` Your ${dropped} was not sent.` : "";
  notice(closedText(id, closedPayloads.get(id)) + unsent);
}

// A card a decision made here swapped in, closed: the task leaves the queue, and the notice
// says what was recorded (or, when it had closed meanwhile, why nothing was).
function removeAnswered(card) {
  const title = card.dataset.title ? ` (${card.dataset.title})` : "";
  const id = card.dataset.taskId;
  const error = card.querySelector(".error");
  dropCard(card);
  if (card.dataset.status === "decided" && card.dataset.decidedHere === "true") {
    notice(`You chose ${card.dataset.decision} on task ${id}${title}.`);
  } else {
    notice(error ? `Task ${id}${title}: ${error.textContent}` : closedText(Number(id), null));
  }
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
      const more = holder.querySelector("[data-page-more]");
      if (more) pageMore = more.dataset.pageMore === "true";
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
  } else if (kind === "claimed") {
    refreshClaim(task);
  } else if (kind === "created" && task.status === "open") {
    closedPayloads.delete(task.id);
    // Shown only if the page shows every other open task (no gap before it) and is not long.
    const shown = waiting();
    if (fromOldest && shown >= count - 1 && shown < pageSize) addCard(task.id);
  }
}

// --- keyboard triage ------------------------------------------------------------------------

const selectedCard = () => (selectedId === null ? null : cardOf(selectedId));

function focusComment() {
  const card = selectedCard();
  const comment = card && card.querySelector("form.decide textarea");
  if (comment) comment.focus();
}

function decide(option) {
  const card = selectedCard();
  const form = card && card.dataset.status === "open" ? card.querySelector("form.decide") : null;
  if (!form) return;
  const button = form.querySelector(`button[name="decision"][value="${option}"]`);
  if (!button) {
    notice(`Task ${card.dataset.taskId} cannot be answered with ${option}.`);
    return;
  }
  const comment = form.querySelector("textarea");
  if (option === "revise" && comment && !comment.value.trim()) {
    notice("Say what to revise in the comment (c), then press Esc and v.");
    comment.focus();
    return;
  }
  if (held.has(card.dataset.taskId)) {
    notice(`Task ${card.dataset.taskId} is decided already: u takes it back.`);
    return;
  }
  hold(card, option);
}

// --- decisions held for the undo window ---------------------------------------------------

function labelOf(card, option) {
  const button = card.querySelector(`form.decide button[name="decision"][value="${option}"]`);
  return button ? button.textContent.trim() : option;
}

// What the row of a held decision says: held, and for how long still.
function heldText(card, holding) {
  const left = Math.max(0, Math.ceil((holding.until - Date.now()) / 1000));
  return `${labelOf(card, holding.option)}: held, ${left} s`;
}

// Hold a decision made with a key: the list moves on, a notice counts down to its sending and
// offers Undo meanwhile.
function hold(card, option) {
  const id = card.dataset.taskId;
  const title = card.dataset.title ? ` (${card.dataset.title})` : "";
  const p = document.createElement("p");
  p.className = "notice held";
  // The live region announces the notice once; the countdown it shows is not read each second.
  const seconds = span("visually-hidden", `${Math.round(undoMs / 1000)} s.`);
  const left = span("held-left", "");
  left.setAttribute("aria-hidden", "true");
  const undoButton = document.createElement("button");
  undoButton.type = "button";
  undoButton.textContent = "Undo";
  undoButton.addEventListener("click", () => undo(id));
  p.append(`${labelOf(card, option)} on task ${id}${title}: sent in `, seconds, left, " ", undoButton, " (u)");
  if (notices) notices.prepend(p);
  const until = Date.now() + undoMs;
  const countDown = () => {
    left.textContent = `${Math.max(0, Math.ceil((until - Date.now()) / 1000))} s.`;
    const badge = document.querySelector(`#row-${CSS.escape(id)} .badge.held`);
    if (badge && held.has(id)) badge.textContent = heldText(card, held.get(id));
  };
  const ticker = setInterval(countDown, 1000);
  const timer = setTimeout(() => send(id), undoMs);
  held.set(id, { option, notice: p, timer, ticker, until });
  countDown();
  card.dataset.held = option;
  move(1);
  refresh();
}

// Forget a held decision (sent, taken back or overtaken); return its option, if one was held.
function release(id) {
  const holding = held.get(id);
  if (!holding) return null;
  clearTimeout(holding.timer);
  clearInterval(holding.ticker);
  holding.notice.remove();
  held.delete(id);
  const card = cardOf(id);
  if (card) delete card.dataset.held;
  return holding.option;
}

function send(id) {
  const option = release(id);
  const card = cardOf(id);
  const form = card && card.dataset.status === "open" ? card.querySelector("form.decide") : null;
  const button = form && form.querySelector(`button[name="decision"][value="${option}"]`);
  if (button) {
    // The row says "sending…" until the answer replaces the card, or the request fails.
    sending.set(id, option);
    form.addEventListener("htmx:afterRequest", () => {
      sending.delete(id);
      refresh();
    }, { once: true });
    button.click();
  }
  refresh();
}

function undo(id = [...held.keys()].at(-1)) {
  const option = id === undefined ? null : release(id);
  if (!option) {
    notice("No decision is waiting to be sent: nothing to undo.");
    return;
  }
  notice(`Taken back: task ${id} stays open, nothing was sent.`);
  select(id, { focus: true });
  refresh();
}

// Leaving the page, or hiding it (a phone may close a hidden page without telling), sends what
// is held, as the closing window would have: a beacon outlives the page. The decision's own
// fields, comment included, go with it. A beacon the browser will not queue goes as a request
// that outlives the page too, and the page says so.
function sendHeldNow() {
  for (const [id, { option }] of [...held]) {
    release(id);
    const form = cardOf(id) && cardOf(id).querySelector("form.decide");
    if (!form) continue;
    const data = new FormData(form);
    data.set("decision", option);
    sending.set(id, option);
    if (navigator.sendBeacon(form.action, data)) continue;
    notice(`Task ${id}: the browser would not send the decision on leaving, so it is sent now.`);
    fetch(form.action, { method: "POST", body: data, credentials: "same-origin", keepalive: true })
      .then((response) => notice(response.ok ? `Task ${id}: ${option} sent.` : `Task ${id}: ${option} was not taken (the server answered ${response.status}); decide again.`))
      .catch(() => notice(`Task ${id}: ${option} could not be sent; decide again.`))
      .finally(() => {
        sending.delete(id);
        refresh();
      });
  }
  refresh();
}

function toggleClaim() {
  const card = selectedCard();
  const button = card && card.querySelector("form.claim button[name=action]");
  if (button) button.click();
}

const KEYS = {
  j: () => move(1),
  k: () => move(-1),
  a: () => decide("approve"),
  r: () => decide("reject"),
  v: () => decide("revise"),
  c: focusComment,
  "/": focusComment,
  m: toggleClaim,
  u: () => undo(),
};

if (list && layout) {
  layout.classList.add("split");
  const wanted = window.location.hash.match(/^#task-(\d+)$/);
  refresh();
  if (wanted) select(wanted[1]);

  rows.addEventListener("click", (event) => {
    const row = event.target.closest(".task-row");
    if (!row) return;
    event.preventDefault();
    select(row.dataset.taskId, { focus: "card" });
    history.replaceState(null, "", `#task-${row.dataset.taskId}`);
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    const target = event.target;
    if (target.closest && target.closest("input, textarea, select, [contenteditable]")) {
      // Esc leaves the comment, for the keys to work again.
      if (event.key === "Escape" && target.matches("textarea")) {
        event.preventDefault();
        target.blur();
        focusRow();
      }
      return;
    }
    const action = KEYS[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  });

  // The badges follow the clock: a task becomes due soon, then overdue, while the page is open.
  setInterval(refresh, 30000);
  window.addEventListener("pagehide", sendHeldNow);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") sendHeldNow();
  });

  // On a phone the filters fold under their summary, unless they say something is wrong.
  const filterBox = document.getElementById("inbox-filter-box");
  const fitFilters = () => {
    if (filterBox) filterBox.open = !PHONE.matches || filterBox.dataset.keepOpen === "true";
  };
  fitFilters();
  PHONE.addEventListener("change", fitFilters);
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
  if (target && target.matches && target.matches(".task-card, form.claim")) {
    if ([400, 403, 409].includes(event.detail.xhr.status)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  }
});
// A decision recorded here swaps in the card of the decided task: it leaves the queue.
document.body.addEventListener("htmx:afterSwap", () => {
  if (!list) return;
  list
    .querySelectorAll('.task-card:not([data-status="open"], [data-status="deciding"])')
    .forEach(removeAnswered);
  refresh();
});

// While this user's decision is on its way, the task's "closed" push may arrive first: keep the
// card (it is about to show the outcome) instead of removing it as decided by someone else.
document.body.addEventListener("htmx:beforeRequest", (event) => {
  const form = event.detail.elt;
  if (!form.matches || !form.matches("form.decide")) return;
  const card = form.closest(".task-card");
  release(card.dataset.taskId); // a button clicked while a key's decision was held
  card.dataset.status = "deciding";
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
