/*
 * recipe-graph.js: the one module that converts between recipe format v1 and Cytoscape.
 *
 * A step is a node whose data keeps the step document (without its branches and position);
 * a branch is an edge whose data keeps the branch document as written. Saving turns the
 * graph back into the document, so a recipe that is opened and saved untouched comes back
 * unchanged. Edges are drawn where a branch *leads*: @repeat and the repeat actions as a
 * self-loop, @end and END_RECIPE to the End terminal, @complete to the Complete terminal.
 */
import { alwaysHolds, bandStart, canonicalAction, conditionWords, kindLabel, kindTakes, repeats, stepKinds } from "./catalog.js";

export const END_ID = "t-end";
export const COMPLETE_ID = "t-complete";
let counter = 0;

function newId(prefix) {
  counter += 1;
  return prefix + "-" + counter.toString(36) + "-" + Math.random().toString(36).slice(2, 7);
}

export function clone(value) {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}

function text(value) {
  return typeof value === "string" ? value : "";
}

/**
 * Return a branch's label in words: when it is taken and where it leads, "if judge < 7 →
 * Human check", "otherwise → Draft", "approve → Publish". `to` is the words of its target
 * (`targetWords`); the engine's code (priority, action, target) is in the tooltip and panel.
 */
export function edgeLabel(branch, to) {
  return conditionWords(branch.when) + " → " + to;
}

/** Return where a branch leads (`visualTarget`) in words: a step's name, End, Complete, again. */
export function targetWords(visual, nameByKey) {
  if (visual === "@repeat") return "again";
  if (visual === "@end") return "End";
  if (visual === "@complete") return "Complete";
  if (!visual) return "no target";
  return Object.prototype.hasOwnProperty.call(nameByKey, visual) ? nameByKey[visual] : visual + " (missing)";
}

// Each step's key → the name a branch label calls it by (its name, else its key).
function namesByKey(steps) {
  const names = Object.create(null);
  steps.forEach((step) => {
    const key = text(step.key);
    if (key && !(key in names)) names[key] = text(step.name) || key;
  });
  return names;
}

// What a card names beside its kind: the actor, or what a kind that asks none works by.
function actorText(step) {
  if (step.actor) return step.actor;
  if (step.kind === "decision_tree") return "rules";
  if (step.kind === "http") return step.method || "GET";
  return "no actor";
}

export function nodeLabel(step) {
  const kind = kindLabel(step.kind || "llm");
  return text(step.name) + "\n" + kind + " · " + actorText(step);
}

/** Redraw an element's label and classes from its data, after the data changed. */
export function refreshElement(ele) {
  if (ele.data("kind") === "branch") {
    // Its label names its target: syncEdges writes it, once the edge leads there.
    ele.toggleClass("inactive", ele.data("branch").active === false);
  } else if (ele.data("kind") === "step") {
    const step = ele.data("step");
    const kind = step.kind || "llm";
    ele.data("label", nodeLabel(step));
    ele.data("stepKind", kind);
    stepKinds().forEach((k) => ele.toggleClass("kind-" + k, kind === k));
  }
}

/** Return where a branch leads as drawn: a step key, "@repeat", "@end", "@complete" or "". */
export function visualTarget(branch, stepKey, lastKey) {
  const action = canonicalAction(branch.action);
  const target = text(branch.target);
  if (repeats(action)) return "@repeat";
  if (action === "END_RECIPE") return "@end";
  if (action === "SKIP_TO_END" && !target) return lastKey;
  if (target === stepKey) return "@repeat";
  return target;
}

function stepData(step) {
  const data = clone(step);
  delete data.branches;
  delete data.position;
  return data;
}

function terminalNodes() {
  return [
    { group: "nodes", data: { id: END_ID, kind: "terminal", label: "End\n@end", terminal: "@end" }, classes: "terminal end" },
    { group: "nodes", data: { id: COMPLETE_ID, kind: "terminal", label: "Complete\n@complete", terminal: "@complete" }, classes: "terminal complete" },
  ];
}

function missingNode(id, key) {
  return { group: "nodes", data: { id: id, kind: "missing", label: key ? "missing: " + key : "no target" }, classes: "missing" };
}

/** Return the id of the node a branch is drawn to, given where it leads (`visualTarget`). */
function targetId(visual, sourceId, idByKey) {
  if (visual === "@repeat") return sourceId;
  if (visual === "@end") return END_ID;
  if (visual === "@complete") return COMPLETE_ID;
  if (visual && idByKey[visual]) return idByKey[visual];
  return "m-" + (visual || "none") + "-" + sourceId;
}

/**
 * Turn a recipe document into Cytoscape elements.
 * Returns {elements, meta, needsLayout, positionedCount}: `meta` is the document without its
 * steps.
 */
export function toElements(doc) {
  const meta = clone(doc) || {};
  const steps = (Array.isArray(meta.steps) ? meta.steps : []).filter((s) => s && typeof s === "object" && !Array.isArray(s));
  delete meta.steps;
  const nodes = [];
  const edges = [];
  const idByKey = {};
  let positioned = 0;
  steps.forEach((step, i) => {
    const id = newId("s");
    if (typeof step.key === "string" && !(step.key in idByKey)) idByKey[step.key] = id;
    const pos = step.position && typeof step.position.x === "number" && typeof step.position.y === "number"
      ? { x: step.position.x, y: step.position.y } : null;
    if (pos) positioned += 1;
    const data = stepData(step);
    const node = {
      group: "nodes",
      data: {
        id: id, kind: "step", key: text(step.key), order: i, step: data,
        origPosition: step.position === undefined ? null : clone(step.position),
        moved: false, label: nodeLabel(data), stepKind: data.kind || "llm",
      },
      classes: "step kind-" + (data.kind || "llm") + (i === 0 ? " first" : ""),
    };
    if (pos) node.position = pos;
    nodes.push(node);
  });
  const lastKey = nodes.length ? nodes[nodes.length - 1].data.key : "";
  const names = namesByKey(steps);
  const missing = {};
  nodes.forEach((node, i) => {
    const source = node.data.id;
    (Array.isArray(steps[i].branches) ? steps[i].branches : []).forEach((branch, j) => {
      if (!branch || typeof branch !== "object") return;
      const visual = visualTarget(branch, node.data.key, lastKey);
      const target = targetId(visual, source, idByKey);
      if (target.indexOf("m-") === 0 && !missing[target]) {
        missing[target] = missingNode(target, visual);
        if (node.position) missing[target].position = { x: node.position.x + 220, y: node.position.y + 90 };
      }
      edges.push({
        group: "edges",
        data: {
          id: newId("b"), kind: "branch", source: source, target: target,
          branch: clone(branch), seq: j, label: edgeLabel(branch, targetWords(visual, names)),
        },
        classes: "branch",
      });
    });
  });
  const extra = Object.keys(missing).map((k) => missing[k]);
  return {
    elements: nodes.concat(terminalNodes(), extra, edges),
    meta: meta,
    needsLayout: nodes.length > 0 && positioned < nodes.length,
    positionedCount: positioned,
  };
}

export function stepNodes(cy) {
  return cy.nodes('[kind = "step"]').sort((a, b) => a.data("order") - b.data("order"));
}

export function branchEdges(node) {
  return node.connectedEdges('[kind = "branch"]').filter((e) => e.source().same(node)).sort((a, b) => {
    const pa = a.data("branch").priority;
    const pb = b.data("branch").priority;
    const na = typeof pa === "number" ? pa : Infinity;
    const nb = typeof pb === "number" ? pb : Infinity;
    return na !== nb ? na - nb : a.data("seq") - b.data("seq");
  });
}

function roundPosition(p) {
  return { x: Math.round(p.x), y: Math.round(p.y) };
}

/**
 * Turn the graph back into a recipe document.
 * Returns {document, paths, elements}: `paths` maps element ids to document paths
 * (`steps[2]`, `steps[0].branches[1]`), `elements` maps paths back to ids.
 */
export function toDocument(cy, meta) {
  const paths = {};
  const elements = {};
  const steps = stepNodes(cy).map((node, i) => {
    const step = clone(node.data("step"));
    if (node.data("moved")) {
      step.position = roundPosition(node.position());
    } else if (node.data("origPosition") !== null && node.data("origPosition") !== undefined) {
      step.position = clone(node.data("origPosition"));
    }
    step.branches = branchEdges(node).map((edge, j) => {
      const path = "steps[" + i + "].branches[" + j + "]";
      paths[edge.id()] = path;
      elements[path] = edge.id();
      return clone(edge.data("branch"));
    });
    paths[node.id()] = "steps[" + i + "]";
    elements["steps[" + i + "]"] = node.id();
    return step;
  });
  const doc = clone(meta) || {};
  doc.steps = steps;
  return { document: doc, paths: paths, elements: elements };
}

/** Return the element id a lint path points at (the branch if any, else the step). */
export function elementForPath(elements, path) {
  const found = /^steps\[(\d+)\](?:\.branches\[(\d+)\])?/.exec(path || "");
  if (!found) return null;
  if (found[2] !== undefined) {
    const branch = elements["steps[" + found[1] + "].branches[" + found[2] + "]"];
    if (branch) return branch;
  }
  return elements["steps[" + found[1] + "]"] || null;
}

function leafNames(tree) {
  const names = [];
  if (!tree || typeof tree !== "object") return names;
  const stack = [tree.type === "node" || tree.type === "leaf" ? tree : tree.tree];
  while (stack.length) {
    const node = stack.pop();
    if (!node || typeof node !== "object") continue;
    if (node.type === "leaf" && typeof node.prompt === "string") names.push(node.prompt);
    else stack.push(node.if_false, node.if_true);
  }
  return names;
}

/** Tell whether a branch is always taken when it is reached: an active `default` one. */
function alwaysTaken(branch) {
  return !!branch && branch.active !== false && alwaysHolds(branch.when);
}

/**
 * Return the elements of the dashed arrows of the implicit next step: a step none of whose
 * branches is always taken goes on to the next step in order when none is (the last one to
 * Complete: the run succeeds). A decision tree goes where its leaves say.
 */
function sequenceEdges(nodes) {
  const edges = [];
  nodes.forEach((n, i) => {
    if (n.data("step").kind === "decision_tree") return;
    if (branchEdges(n).some((e) => alwaysTaken(e.data("branch")))) return;
    const next = i + 1 < nodes.length ? nodes[i + 1].id() : COMPLETE_ID;
    edges.push({
      group: "edges",
      data: { id: "seq-" + n.id(), kind: "sequence", source: n.id(), target: next, label: "" },
      classes: "sequence",
    });
  });
  return edges;
}

/**
 * Point every branch edge at where its branch leads now and label it in words, keep
 * placeholder nodes for missing targets, and redraw the dashed leaf edges of decision trees
 * and of the implicit next step. Call after any data change.
 */
export function syncEdges(cy) {
  const nodes = stepNodes(cy);
  const idByKey = {};
  nodes.forEach((n) => {
    if (!(n.data("key") in idByKey)) idByKey[n.data("key")] = n.id();
  });
  const names = namesByKey(nodes.map((n) => n.data("step")));
  const lastKey = nodes.length ? nodes[nodes.length - 1].data("key") : "";
  cy.batch(() => {
    nodes.forEach((n, i) => n.toggleClass("first", i === 0));
    const wanted = {};
    cy.edges('[kind = "branch"]').forEach((edge) => {
      const source = edge.source();
      const visual = visualTarget(edge.data("branch"), source.data("key"), lastKey);
      const target = targetId(visual, source.id(), idByKey);
      if (target.indexOf("m-") === 0) {
        wanted[target] = true;
        if (cy.getElementById(target).empty()) {
          const p = source.position();
          cy.add(Object.assign(missingNode(target, visual), { position: { x: p.x + 220, y: p.y + 90 } }));
        }
      }
      if (edge.target().id() !== target) edge.move({ target: target });
      const label = edgeLabel(edge.data("branch"), targetWords(visual, names));
      if (edge.data("label") !== label) edge.data("label", label);
    });
    cy.nodes('[kind = "missing"]').forEach((n) => {
      if (!wanted[n.id()]) n.remove();
    });
    cy.edges('[kind = "leaf"]').remove();
    nodes.forEach((n) => {
      const step = n.data("step");
      if (step.kind !== "decision_tree") return;
      const targets = step.leaf_targets || {};
      leafNames(step.tree).forEach((leaf) => {
        const target = targets[leaf] || leaf;
        const id = target === "@end" ? END_ID : target === "@complete" ? COMPLETE_ID : idByKey[target];
        if (!id) return;
        cy.add({
          group: "edges",
          data: { id: "leaf-" + n.id() + "-" + leaf, kind: "leaf", source: n.id(), target: id, label: "leaf: " + leaf },
          classes: "leaf",
        });
      });
    });
    // Only the arrows that changed: an edit of a big recipe redraws none of the others.
    const wantedArrows = {};
    sequenceEdges(nodes.toArray()).forEach((json) => {
      wantedArrows[json.data.id] = json;
    });
    cy.edges('[kind = "sequence"]').forEach((edge) => {
      const json = wantedArrows[edge.id()];
      if (json && json.data.target === edge.target().id()) delete wantedArrows[edge.id()];
      else edge.remove();
    });
    cy.add(Object.keys(wantedArrows).map((id) => wantedArrows[id]));
  });
}

function uniqueKey(cy, base) {
  const keys = {};
  cy.nodes('[kind = "step"]').forEach((n) => {
    keys[n.data("key")] = true;
  });
  let n = 1;
  while (keys[base + "_" + n]) n += 1;
  return base + "_" + n;
}

// What a new step starts with in a required field of its kind that needs more than nothing.
const STARTERS = {
  tree: { version: "1.0", tree: { type: "leaf", prompt: "next" } },
  routes: [{ name: "general", instructions: "Any request.", always_active: true }],
  set: { fact_count: "length(keys(facts))" },
};

/**
 * Return the actor alias a new step of `kind` starts with: the one the recipe's first step of
 * that kind uses, else (for a model step) the first LLM step's, else the first alias that
 * suits; so a new LLM step gets the recipe's writer, not the judge its branches name.
 */
export function defaultActor(cy, meta, kind) {
  const actors = meta.actors || {};
  const human = (alias) => String(actors[alias]).indexOf("@human:") === 0;
  const suits = (alias) => typeof alias === "string" && alias in actors && human(alias) === (kind === "human");
  const usedBy = (wanted) => stepNodes(cy).map((n) => n.data("step")).find((s) => (s.kind || "llm") === wanted && suits(s.actor));
  const found = usedBy(kind) || (kind !== "human" && usedBy("llm"));
  return found ? found.actor : Object.keys(actors).find(suits);
}

/** Return the element JSON of a new step of `kind`, with an actor alias that suits it. */
export function newStep(cy, meta, kind, position) {
  const key = uniqueKey(cy, "step");
  const step = { key: key, name: "New " + kindLabel(kind), kind: kind };
  const actor = kindTakes(kind, "actor") ? defaultActor(cy, meta, kind) : undefined;
  if (actor) step.actor = actor;
  step.prompt = "";
  Object.keys(STARTERS).forEach((name) => {
    if (kindTakes(kind, name)) step[name] = clone(STARTERS[name]);
  });
  return {
    group: "nodes",
    data: {
      id: newId("s"), kind: "step", key: key, order: cy.nodes('[kind = "step"]').length, step: step,
      origPosition: null, moved: true, label: nodeLabel(step), stepKind: kind,
    },
    classes: "step kind-" + kind,
    position: position,
  };
}

/** Return the element JSON of a new branch from `source` to `target` (a node). */
export function newBranch(source, target) {
  return branchTo(source, { id: target.id(), key: target.data("key"), self: target.same(source) });
}

/**
 * Return the element JSON of a new branch from `source` to the node `to` describes (its `id`,
 * its step `key`, whether it is `self`, the source): a node that may not be drawn yet.
 */
export function branchTo(source, to) {
  return branchFrom(source.id(), branchEdges(source).map((e) => e.data("branch")), to);
}

/**
 * Return the element JSON of a new branch from the step `sourceId`, whose branches are
 * `branches`, to `to`. It comes after the other decisions, and never ahead of an always-taken
 * branch: put there, it would take the run elsewhere on every path it took.
 */
function branchFrom(sourceId, branches, to) {
  const names = {};
  const priorities = {};
  let top = 0;
  branches.forEach((b) => {
    names[b.name] = true;
    priorities[b.priority] = true;
    if (typeof b.priority !== "number") return;
    if (b.priority < 900 || alwaysTaken(b)) top = Math.max(top, b.priority);
  });
  let priority = top + 1;
  while (priorities[priority]) priority += 1;
  let branch;
  let base;
  if (to.self) {
    base = "retry";
    branch = { when: { type: "default" }, action: "REQUEST_MORE_DETAIL", target: "@repeat", params: { max_retries: 2 } };
  } else if (to.id === END_ID) {
    base = "stop";
    branch = { when: { type: "default" }, action: "END_RECIPE", target: "@end" };
  } else if (to.id === COMPLETE_ID) {
    base = "finish";
    branch = { when: { type: "default" }, action: "CONTINUE", target: "@complete" };
  } else {
    base = "to_" + to.key;
    branch = { when: { type: "default" }, action: "CONTINUE", target: to.key };
  }
  let name = base;
  let n = 2;
  while (names[name]) {
    name = base + "_" + n;
    n += 1;
  }
  const doc = { name: name, priority: priority, when: branch.when, action: branch.action, target: branch.target };
  if (branch.params) doc.params = branch.params;
  return {
    group: "edges",
    data: {
      id: newId("b"), kind: "branch", source: sourceId, target: to.id,
      branch: doc, seq: 1000 + counter, label: "", // syncEdges writes it

    },
    classes: "branch",
  };
}

// Where a branch's target leads, as a node `to` for branchFrom: a step or an ending; null for
// the next step in order, a repeat or a step not in the recipe.
function nodeFor(cy, target) {
  if (target === "@complete") return { id: COMPLETE_ID, key: "", self: false };
  if (target === "@end") return { id: END_ID, key: "", self: false };
  const node = target ? stepNodes(cy).find((n) => n.data("key") === target) : undefined;
  return node ? { id: node.id(), key: target, self: false } : null;
}

/**
 * Return how the new step `json` goes in right after the step `after` (its "+"), keeping where
 * runs went: `{json, changes}`, the elements to add with it and the changes to others' data. It
 * comes next in order. A step that falls through to the next falls through to it (and it to the
 * next). A step whose always-taken branch continues to a step or an ending continues to the new
 * step, and the new step to there. Else the step gets a branch to it, after its others.
 */
export function insertAfter(cy, after, json) {
  const steps = stepNodes(cy);
  const at = steps.indexOf(after) + 1;
  json.data.order = at;
  const changes = steps.slice(at).map((n, i) => ({ id: n.id(), data: { order: at + i + 1 } }));
  const to = { id: json.data.id, key: json.data.key, self: false };
  const taken = branchEdges(after).filter((e) => alwaysTaken(e.data("branch")))
    .sort((a, b) => a.data("branch").priority - b.data("branch").priority)[0];
  // A decision tree goes where its leaves say, never on to the next step: a branch joins them.
  const fallsThrough = after.data("step").kind !== "decision_tree";
  if (!taken && fallsThrough) return { json: [json], changes: changes };
  const branch = taken ? taken.data("branch") : {};
  const onward = nodeFor(cy, branch.target || "");
  const continues = taken && canonicalAction(branch.action) === "CONTINUE";
  if (!continues || (branch.target && !onward)) return { json: [json, branchTo(after, to)], changes: changes };
  changes.push({ id: taken.id(), data: { branch: Object.assign(clone(branch), { target: json.data.key }) } });
  // To the next step in order, the new step falls through as the step did.
  return { json: onward ? [json, branchFrom(json.data.id, [], onward)] : [json], changes: changes };
}

// The options a human step offers when it names none (the engine's DEFAULT_HUMAN_OPTIONS).
const DEFAULT_OPTIONS = ["approve", "reject", "revise"];

/** Return the options a human step's reviewer picks from. */
export function humanOptions(step) {
  const given = step && Array.isArray(step.options) ? step.options.filter((o) => typeof o === "string" && o) : [];
  return given.length ? given : DEFAULT_OPTIONS;
}

// The step a reviewer's revision goes back to: one whose branch leads here, else the one
// before in order; none for the first step.
function stepBefore(node) {
  const nodes = stepNodes(node.cy());
  const from = node.incomers('edge[kind = "branch"], edge[kind = "sequence"]').sources('[kind = "step"]').filter((n) => !n.same(node));
  if (from.nonempty()) return from.sort((a, b) => b.data("order") - a.data("order")).first();
  const i = nodes.indexOf(node);
  return i > 0 ? nodes[i - 1] : null;
}

/**
 * Return the element JSON of the branches a human step lacks for its options, one each
 * (approve, reject and revise by default): approve goes on to the next step in order (the
 * last step's completes the run), reject ends the run, revise goes back to the step before
 * (runs the step again when there is none); any other option goes on as approve does. Their
 * priorities are in the flow control band (from 51).
 */
export function reviewBranches(node) {
  const cy = node.cy();
  const nodes = stepNodes(cy);
  const i = nodes.indexOf(node);
  const next = i >= 0 && i + 1 < nodes.length ? nodes[i + 1] : null;
  const before = stepBefore(node);
  const handled = {};
  branchEdges(node).forEach((e) => {
    const when = e.data("branch").when || {};
    if (when.type === "human_decision") String(when.value || "").split("|").forEach((o) => {
      handled[o.trim().toLowerCase()] = true;
    });
  });
  const json = [];
  humanOptions(node.data("step")).filter((o) => !handled[o.toLowerCase()]).forEach((option) => {
    let target;
    let action = "CONTINUE";
    if (option === "reject") {
      target = cy.getElementById(END_ID);
      action = "END_RECIPE";
    } else if (option === "revise") {
      target = before || node;
    } else {
      target = next || cy.getElementById(COMPLETE_ID);
      if (!next) action = "QUALITY_APPROVED";
    }
    const edge = newBranch(node, target);
    const branch = edge.data.branch;
    branch.name = uniqueBranchName(node, json, option === "approve" ? "approved" : option === "reject" ? "rejected" : option);
    branch.when = { type: "human_decision", operator: "user_choice", value: option };
    branch.action = action;
    delete branch.params;
    if (target.same(node)) branch.target = "@repeat";
    // A reviewer's decision steers the run: in the flow control band, each after the one before.
    branch.priority = Math.max(branch.priority, bandStart("flow"));
    while (json.some((e) => e.data.branch.priority === branch.priority) || branchEdges(node).some((e) => e.data("branch").priority === branch.priority)) {
      branch.priority += 1;
    }
    json.push(edge);
  });
  return json;
}

function uniqueBranchName(node, pending, base) {
  const taken = {};
  branchEdges(node).forEach((e) => {
    taken[e.data("branch").name] = true;
  });
  pending.forEach((e) => {
    taken[e.data.branch.name] = true;
  });
  let name = base;
  for (let n = 2; taken[name]; n += 1) name = base + "_" + n;
  return name;
}

/** Return JSON that compares equal for equal documents, whatever the key order. */
export function stableStringify(value) {
  if (Array.isArray(value)) return "[" + value.map(stableStringify).join(",") + "]";
  if (value && typeof value === "object") {
    return "{" + Object.keys(value).sort().map((k) => JSON.stringify(k) + ":" + stableStringify(value[k])).join(",") + "}";
  }
  return JSON.stringify(value === undefined ? null : value);
}

// -- copy and paste -----------------------------------------------------------------------------

// Step keys are stored in columns of 100 characters: a copy's key is cut to fit.
const MAX_KEY = 100;

/**
 * Return the documents of the steps drawn as `nodes`, in step order, with their branches and
 * where they are drawn: what copying them keeps.
 */
export function stepDocuments(nodes) {
  return nodes.sort((a, b) => a.data("order") - b.data("order")).map((node) => {
    const step = clone(node.data("step"));
    step.position = roundPosition(node.position());
    step.branches = branchEdges(node).map((edge) => clone(edge.data("branch")));
    return step;
  });
}

/** Return the recipe's actor aliases (`actors`: alias → reference) that `steps` name. */
export function aliasesNamed(steps, actors) {
  const named = {};
  const walk = (value) => {
    if (typeof value === "string" && Object.prototype.hasOwnProperty.call(actors, value)) named[value] = actors[value];
    else if (value && typeof value === "object") Object.keys(value).forEach((k) => walk(value[k]));
  };
  walk(steps);
  return named;
}

function freeKey(taken, base) {
  const stem = base.slice(0, MAX_KEY - 4);
  let key = stem;
  for (let n = 2; taken[key]; n += 1) key = stem + "_" + n;
  return key;
}

/**
 * Return the Cytoscape JSON of `steps` (from `stepDocuments`) pasted into `cy`, moved by
 * `offset`, after the steps it has: each with a new key (`KEY_copy`, `KEY_copy_2`, …) and
 * "(copy)" after its name. A branch or decision-tree leaf that led to a pasted step leads to
 * its copy; any other still leads where it did (a step missing here shows as missing).
 */
export function pastedElements(cy, steps, offset) {
  // Keys are the authors' words ("constructor" too): maps without a prototype hold them.
  const taken = Object.create(null);
  const idByKey = Object.create(null);
  stepNodes(cy).forEach((n) => {
    taken[n.data("key")] = true;
    if (!(n.data("key") in idByKey)) idByKey[n.data("key")] = n.id();
  });
  const renamed = Object.create(null);
  const newKeys = steps.map((step) => {
    // A step saved without a key yet (a draft with errors) is copied as step_copy.
    const key = freeKey(taken, (text(step.key) || "step") + "_copy");
    taken[key] = true;
    if (text(step.key)) renamed[step.key] = key;
    return key;
  });
  const first = cy.nodes('[kind = "step"]').length;
  const nodes = steps.map((doc, i) => {
    const step = stepData(doc);
    step.key = newKeys[i];
    step.name = text(doc.name) + " (copy)";
    if (step.kind === "decision_tree") {
      const given = step.leaf_targets && typeof step.leaf_targets === "object" ? step.leaf_targets : {};
      const targets = Object.assign(Object.create(null), given);
      leafNames(step.tree).forEach((leaf) => {
        const target = leaf in targets ? targets[leaf] : leaf;
        if (renamed[target]) targets[leaf] = renamed[target];
      });
      if (Object.keys(targets).length) step.leaf_targets = targets;
    }
    const id = newId("s");
    idByKey[step.key] = id;
    const at = doc.position || { x: 0, y: 0 };
    return {
      group: "nodes",
      data: {
        id: id, kind: "step", key: step.key, order: first + i, step: step, origPosition: null,
        moved: true, label: nodeLabel(step), stepKind: step.kind || "llm",
      },
      classes: "step kind-" + (step.kind || "llm"),
      position: { x: at.x + offset.x, y: at.y + offset.y },
    };
  });
  const lastKey = nodes.length ? nodes[nodes.length - 1].data.key : "";
  const edges = [];
  steps.forEach((doc, i) => {
    const source = nodes[i].data.id;
    (Array.isArray(doc.branches) ? doc.branches : []).forEach((original, j) => {
      const branch = clone(original);
      if (renamed[branch.target]) branch.target = renamed[branch.target];
      const target = targetId(visualTarget(branch, nodes[i].data.key, lastKey), source, idByKey);
      edges.push({
        group: "edges",
        // A target missing here starts on the step itself: syncEdges draws its placeholder.
        data: {
          id: newId("b"), kind: "branch", source: source, target: target.indexOf("m-") === 0 ? source : target,
          branch: branch, seq: j, label: "", // syncEdges writes it
        },
        classes: "branch",
      });
    });
  });
  return nodes.concat(edges);
}
