/*
 * monitor.js: the run monitor, live.
 *
 * The page is rendered from the database; this script follows the run's websocket from the
 * last event the page knew of. A started step gets a card at once, built here with
 * textContent, whose response streams in as text. When a step commits, its card is fetched
 * again from the server (prompt, response, metrics, evaluations), and so is the header when
 * the run's status changes. The graph highlights the steps visited and the branches taken.
 */
import { COMPLETE_ID, END_ID } from "../editor/recipe-graph.js";
import { loadPartial } from "./partials.js";
import { createRunGraph, edgeOf, fillPanel, nodeOf, runLayout, takenLabel } from "./run-graph.js";
import { RunSocket } from "./socket.js";

const config = JSON.parse(document.getElementById("monitor-config").textContent);
const steps = document.getElementById("steps");
const liveState = document.getElementById("live-state");
const TERMINAL = ["succeeded", "failed", "cancelled", "ended"];

function cardUrl(seq) {
  return config.cardUrl.replace(/0\/$/, `${encodeURIComponent(seq)}/`);
}

function setLive(text) {
  liveState.textContent = text;
}

// --- step cards -----------------------------------------------------------------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function placeCard(card) {
  const seq = Number(card.dataset.seq);
  const after = [...steps.querySelectorAll(".step-card")].find((c) => Number(c.dataset.seq) > seq);
  steps.insertBefore(card, after || null);
}

/** Add the card of a step that started (if the page has none yet) and return it. */
function startedCard(data) {
  const existing = document.getElementById(`step-${data.seq}`);
  if (existing) return existing;
  const card = el("article", "step-card card running");
  card.id = `step-${data.seq}`;
  card.dataset.seq = data.seq;
  card.dataset.step = data.step || "";
  card.dataset.kind = data.kind || "";
  card.dataset.running = "";
  const head = el("header", "step-head");
  head.append(el("span", "seq", `#${data.seq}`), el("h2", "", data.name || data.step));
  head.append(el("span", "badge running", data.kind === "human" ? "asking reviewers" : "running"));
  const meta = el("p", "meta muted", data.kind || "");
  if (data.actor) {
    meta.append(" · actor ");
    meta.append(el("strong", "", data.actor));
  }
  meta.append(` · attempt ${data.attempt || 1}`);
  card.append(head, meta, el("pre", "text stream"));
  card.lastElementChild.dataset.stream = "";
  placeCard(card);
  return card;
}

// How many characters (code points, as the server counts them) each stream shows.
const streamed = new WeakMap();

/**
 * Add streamed text that starts `offset` characters into the step's answer. On connecting, the
 * socket sends all the text so far (offset 0) and then each push: a part already shown is
 * dropped; a push that skips ahead (one was lost) is shown all the same.
 */
function appendToken(seq, text, offset) {
  const card = document.getElementById(`step-${seq}`) || startedCard({ seq, step: "", kind: "llm" });
  const stream = card.querySelector("[data-stream]");
  if (!card.hasAttribute("data-running") || !stream) return;
  const chars = Array.from(text);
  const shown = streamed.get(stream) || 0;
  const fresh = chars.slice(Math.max(0, shown - offset));
  if (!fresh.length) return;
  stream.append(document.createTextNode(fresh.join("")));
  streamed.set(stream, Math.max(shown, offset) + fresh.length);
}

// --- tool calls, live ------------------------------------------------------------------------

/** Return the tool-calls list of a card, adding the section (as _tool_calls.html draws it). */
function toolCallList(card) {
  let section = card.querySelector("[data-tool-calls]");
  if (!section) {
    section = el("section", "tool-calls");
    section.dataset.toolCalls = "";
    section.setAttribute("aria-label", `Tool calls of step ${card.dataset.seq}`);
    const heading = el("h3", "", "Tool calls ");
    const count = el("span", "muted", "(0)");
    count.dataset.toolCallCount = "";
    heading.append(count);
    section.append(heading, el("ol", "tool-call-list"));
    const stream = card.querySelector("[data-stream]");
    card.insertBefore(section, stream || null);
  }
  return section.querySelector(".tool-call-list");
}

function jsonText(value) {
  try {
    return JSON.stringify(value === undefined ? {} : value, null, 2);
  } catch {
    return String(value);
  }
}

/** Show one call of a running step's tool loop (`step.tool_call`): text only, never HTML. */
function addToolCall(data) {
  const card = document.getElementById(`step-${data.seq}`) || startedCard({ seq: data.seq, step: "", kind: "" });
  const list = toolCallList(card);
  const failed = Boolean(data.is_error || data.error);
  const item = el("li", failed ? "tool-call-item failed" : "tool-call-item");
  const details = el("details");
  const summary = el("summary");
  summary.append(el("code", "tool-name", data.tool || "?"), " ");
  summary.append(el("span", failed ? "badge failed" : "badge succeeded", failed ? "error" : "ok"));
  if (data.latency_ms !== undefined && data.latency_ms !== null) {
    summary.append(" ", el("span", "muted latency", `${data.latency_ms} ms`));
  }
  if (data.truncated) {
    const badge = el("span", "badge truncated", "truncated");
    badge.title = "The result was longer than the limit and was cut.";
    summary.append(" ", badge);
  }
  const body = el("div", "tool-call-body");
  body.append(el("p", "muted", "Arguments"), el("pre", "text arguments", jsonText(data.arguments)));
  if (data.error) body.append(el("p", "error", data.error));
  if (data.result) {
    body.append(el("p", "muted", data.is_error ? "Error from the tool" : "Result"));
    body.append(el("pre", "text result", data.result));
  }
  details.append(summary, body);
  item.append(details);
  list.append(item);
  const count = card.querySelector("[data-tool-call-count]");
  if (count) count.textContent = `(${list.children.length})`;
}

// One request at a time per piece of the page; a change that comes in meanwhile asks once more,
// so a slow older answer never overwrites a newer one.
const refreshing = new Map();

function refresh(key, load) {
  const state = refreshing.get(key);
  if (state) {
    state.again = true;
    return;
  }
  const entry = { again: false };
  refreshing.set(key, entry);
  const go = () =>
    load().catch(() => false).finally(() => {
      if (entry.again) {
        entry.again = false;
        go();
      } else {
        refreshing.delete(key);
      }
    });
  go();
}

function refreshCard(seq) {
  refresh(`step-${seq}`, () => {
    if (!document.getElementById(`step-${seq}`)) startedCard({ seq, step: "", kind: "" });
    return loadPartial(cardUrl(seq), `#step-${seq}`, "outerHTML");
  });
}

function refreshHeader() {
  refresh("header", () => loadPartial(config.headerUrl, "#run-header", "outerHTML"));
}

function cardOfTask(task) {
  const byId = steps.querySelector(`[data-task-id="${CSS.escape(String(task.id))}"]`);
  if (byId) return byId;
  const cards = [...steps.querySelectorAll(".step-card")].filter((c) => c.dataset.step === task.step);
  return cards[cards.length - 1] || null;
}

// --- the graph ------------------------------------------------------------------------------

// The run's path in each colour scheme: the steps it visited and the branches it took.
const PATH_COLOURS = {
  light: { visited: "#d1fadf", visitedLine: "#12805c", path: "#2f5bea" },
  dark: { visited: "#0b3b26", visitedLine: "#47cd89", path: "#8cb0ff" },
};

function createGraph(doc, path) {
  const cy = createRunGraph({
    container: document.getElementById("run-graph"),
    doc,
    style: (scheme) => {
      const c = PATH_COLOURS[scheme];
      return [
        { selector: "node.visited", style: { "background-color": c.visited, "border-color": c.visitedLine } },
        { selector: "node.current", style: { "border-width": 3, "border-color": c.path } },
        {
          selector: "edge.taken",
          style: { width: 3, "line-color": c.path, "target-arrow-color": c.path, ...takenLabel(scheme) },
        },
      ];
    },
    layout: runLayout({ nodeSep: 16, rankSep: 28 }),
    missing: "The graph library is not installed here (make vendor).",
  });
  if (!cy) return null;
  fillPanel(cy);
  window.addEventListener("resize", () => fillPanel(cy));
  const graph = {
    visit(key) {
      cy.nodes(".current").removeClass("current");
      nodeOf(cy, key).addClass("visited current");
    },
    taken(key, branch) {
      edgeOf(cy, key, branch).forEach((e) => e.data("takenLabel", branch).addClass("taken"));
    },
    finish(status) {
      cy.nodes(".current").removeClass("current");
      const id = status === "succeeded" ? COMPLETE_ID : status === "ended" ? END_ID : null;
      if (id) cy.getElementById(id).addClass("visited");
    },
  };
  path.forEach((p) => {
    graph.visit(p.step);
    graph.taken(p.step, p.branch);
  });
  return graph;
}

let graph = null;
try {
  graph = createGraph(config.document, config.path);
} catch (error) {
  document.getElementById("run-graph").textContent = "The graph could not be drawn.";
}
const running = steps.querySelector(".step-card[data-running]");
if (graph && running) graph.visit(running.dataset.step);
if (graph && TERMINAL.includes(config.status)) graph.finish(config.status);

// --- events ---------------------------------------------------------------------------------

let socket = null;

function onEvents(events) {
  const cards = new Set();
  let header = false;
  for (const event of events) {
    const data = event.data || {};
    switch (event.type) {
      case "step.started":
        startedCard(data);
        if (graph) graph.visit(data.step);
        break;
      case "step.finished":
        cards.add(data.seq);
        header = true; // the run's totals of tokens, calls and cost grew
        break;
      case "branch.evaluated":
        cards.add(data.seq);
        break;
      case "branch.taken":
        cards.add(data.seq);
        if (graph) graph.taken(data.step, data.branch);
        break;
      case "human_task.created":
      case "human_task.decided":
      case "human_task.escalated":
      case "human_task.timed_out":
      case "human_task.closed": {
        const card = cardOfTask(data);
        if (card) cards.add(Number(card.dataset.seq));
        break;
      }
      case "run.queued":
      case "run.started":
      case "run.status":
      case "run.finished":
        header = true;
        if (TERMINAL.includes(data.status)) {
          if (graph) graph.finish(data.status);
          setLive(`The run has ${data.status}.`);
          socket.close();
        }
        break;
      default:
        break;
    }
  }
  cards.forEach((seq) => refreshCard(seq));
  if (header) refreshHeader();
}

if (TERMINAL.includes(config.status)) {
  setLive(`The run has ${config.status}.`);
} else {
  socket = new RunSocket(config.run, {
    after: config.after,
    onEvents,
    onToken: appendToken,
    onToolCall: addToolCall,
    onState(state) {
      if (state === "open") setLive("Live: changes appear as they happen.");
      else if (state === "reconnecting") setLive("Connection lost; reconnecting…");
    },
  }).open();
}
