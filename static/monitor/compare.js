/*
 * compare.js: both runs' paths on one recipe graph.
 *
 * The page's table says everything; this draws the recipe (B's version, with the steps and
 * branches only A's version has added: see editor/views/compare.py) and marks each step and
 * branch by the runs that went through it: A only, B only, or both; the step where the runs
 * part and the branch each took there are marked apart. The graph is drawn as the monitor's is
 * (run-graph.js).
 */
import { COMPLETE_ID, END_ID } from "../editor/recipe-graph.js";
import { createRunGraph, edgeOf, nodeOf, runLayout, takenLabel } from "./run-graph.js";

const config = JSON.parse(document.getElementById("compare-config").textContent);
const container = document.getElementById("compare-graph");

// Each run's colour (A, B, both) and the first change's, with the steps' fills, per scheme.
const COLOURS = {
  light: { a: "#dc6803", b: "#2f5bea", both: "#12805c", first: "#c4320a", aBg: "#fef0c7", bBg: "#d1e9ff", bothBg: "#d1fadf" },
  dark: { a: "#f5a545", b: "#8cb0ff", both: "#47cd89", first: "#ff8a7a", aBg: "#47300a", bBg: "#1c3366", bothBg: "#0b3b26" },
};

function pathStyle(scheme) {
  const c = COLOURS[scheme];
  return [
    { selector: "node.path-a", style: { "background-color": c.aBg, "border-color": c.a, "border-width": 2 } },
    { selector: "node.path-b", style: { "background-color": c.bBg, "border-color": c.b, "border-width": 2 } },
    { selector: "node.path-a.path-b", style: { "background-color": c.bothBg, "border-color": c.both } },
    { selector: "node.first-change", style: { "border-width": 4, "border-color": c.first } },
    { selector: "edge.path-a, edge.path-b", style: { width: 3, ...takenLabel(scheme) } },
    { selector: "edge.path-a", style: { "line-color": c.a, "target-arrow-color": c.a, "line-style": "dashed" } },
    { selector: "edge.path-b", style: { "line-color": c.b, "target-arrow-color": c.b, "line-style": "solid" } },
    { selector: "edge.path-a.path-b", style: { "line-color": c.both, "target-arrow-color": c.both } },
    { selector: "edge.first-change", style: { width: 5, "font-weight": "bold", color: c.first } },
  ];
}

/** Draw the graph and mark both paths; return the Cytoscape instance, or null. */
function draw() {
  const cy = createRunGraph({
    container,
    doc: config.document,
    style: pathStyle,
    missing: "The graph library is not installed here (make vendor); the table below says the same.",
  });
  if (!cy) return null;
  // Laid out here rather than by the constructor, so that the edges can be bent once the
  // nodes are in place (dagre and breadthfirst lay out at once).
  const layout = cy.layout(runLayout({ nodeSep: 20, rankSep: 32 }));
  layout.one("layoutstop", () => bendAroundNodes(cy));
  layout.run();
  ["a", "b"].forEach((side) => mark(cy, side, config[side]));
  // One label per branch taken, naming the runs that took it.
  cy.edges(".path-a, .path-b").forEach((e) => {
    const runs = ["a", "b"].filter((side) => e.hasClass(`path-${side}`)).map((side) => side.toUpperCase());
    e.data("takenLabel", `${e.data("branch").name} (${runs.join(", ")})`);
  });
  const first = config.firstChange;
  if (first) {
    nodeOf(cy, first.step).addClass("first-change");
    [first.a, first.b].forEach((branch) => edgeOf(cy, first.step, branch).addClass("first-change"));
  }
  return cy;
}

/**
 * Curve the edges that the layout drew straight through another node (a branch that skips a
 * step, such as write → Complete past Review): otherwise it hides behind that node, and a
 * path that took it would look like one that went through the node.
 */
function bendAroundNodes(cy) {
  const MARGIN = 14;
  cy.edges().forEach((edge) => {
    const source = edge.source();
    const target = edge.target();
    if (source.same(target)) return;
    const from = source.position();
    const to = target.position();
    const length = Math.hypot(to.x - from.x, to.y - from.y) || 1;
    // How far a point lies from the line, on the side Cytoscape's positive control-point
    // distances bend towards (positive) or the other (negative).
    const offset = (p) => ((to.x - from.x) * (p.y - from.y) - (to.y - from.y) * (p.x - from.x)) / length;
    const blocking = cy.nodes().filter((node) => {
      if (node.same(source) || node.same(target)) return false;
      const box = node.boundingBox();
      for (let i = 1; i < 20; i += 1) {
        const x = from.x + ((to.x - from.x) * i) / 20;
        const y = from.y + ((to.y - from.y) * i) / 20;
        if (x >= box.x1 && x <= box.x2 && y >= box.y1 && y <= box.y2) return true;
      }
      return false;
    });
    if (!blocking.length) return;
    let positive = 0;
    let negative = 0;
    blocking.forEach((node) => {
      const box = node.boundingBox();
      [[box.x1, box.y1], [box.x1, box.y2], [box.x2, box.y1], [box.x2, box.y2]].forEach(([x, y]) => {
        const d = offset({ x, y });
        positive = Math.max(positive, d);
        negative = Math.max(negative, -d);
      });
    });
    // Round the nodes on their narrower side; a curve's middle lies half its control distance
    // from the line.
    const distance = 2 * (Math.min(positive, negative) + MARGIN) * (positive <= negative ? 1 : -1);
    edge.style({
      "curve-style": "unbundled-bezier",
      "control-point-distances": distance,
      "control-point-weights": 0.5,
    });
  });
}

/** Mark the steps and branches one run went through (`side` is "a" or "b"). */
function mark(cy, side, run) {
  const cls = `path-${side}`;
  run.path.forEach((p) => {
    nodeOf(cy, p.step).addClass(cls);
    edgeOf(cy, p.step, p.branch).addClass(cls);
  });
  const terminal = run.status === "succeeded" ? COMPLETE_ID : run.status === "ended" ? END_ID : null;
  if (terminal) cy.getElementById(terminal).addClass(cls);
}

let cy = null;
try {
  cy = draw();
} catch (error) {
  container.textContent = "The graph could not be drawn; the table below says the same.";
}
container.dataset.ready = cy ? "true" : "false";

// For the browser tests and for curious authors: the marks of a step or a branch.
const classesOf = (elements) => (elements.length ? elements.classes() : []);
window.branchlineCompare = {
  ready: Boolean(cy),
  nodeClasses: (key) => (cy ? classesOf(nodeOf(cy, key)) : []),
  edgeClasses: (key, branch) => (cy ? classesOf(edgeOf(cy, key, branch)) : []),
};
