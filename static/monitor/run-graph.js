/*
 * run-graph.js: the read-only recipe graph that the run monitor and the run comparison draw.
 *
 * Both pages show a run's path on the recipe (recipe-graph.js converts the document) with the
 * same steps, terminals and branches; each adds the styles of its own marks on top.
 */
import { toElements } from "../editor/recipe-graph.js";

/** Steps, terminals, steps the version no longer has, and branches, before any mark. */
export const BASE_STYLE = [
  {
    selector: "node",
    style: {
      label: "data(label)", "text-wrap": "wrap", "text-valign": "center", "font-size": 11,
      "text-max-width": 112, shape: "round-rectangle", width: 120, height: 40, "background-color": "#f2f4f7",
      "border-width": 1, "border-color": "#d0d5dd", color: "#344054",
    },
  },
  { selector: 'node[kind = "terminal"]', style: { shape: "ellipse", width: 80 } },
  { selector: 'node[kind = "missing"]', style: { "border-style": "dashed", opacity: 0.6 } },
  {
    selector: "edge",
    style: {
      width: 1, "curve-style": "bezier", "line-color": "#d0d5dd",
      "target-arrow-shape": "triangle", "target-arrow-color": "#d0d5dd", "arrow-scale": 0.7,
    },
  },
];

/** The style of a taken branch's label (the branch's `takenLabel` data). */
export const TAKEN_LABEL = {
  label: "data(takenLabel)", "font-size": 8, "text-background-color": "#fff", "text-background-opacity": 1,
};

/** Return the layout: top to bottom with dagre where it is installed, breadthfirst otherwise. */
export function runLayout({ nodeSep, rankSep }) {
  return window.cytoscapeDagre
    ? { name: "dagre", rankDir: "TB", nodeSep, rankSep, padding: 8 }
    : { name: "breadthfirst", directed: true, padding: 8 };
}

/**
 * Draw the recipe `doc` in `container` with BASE_STYLE and then `style`; return the Cytoscape
 * instance, or null (saying `missing` in the container) when the graph library is not installed.
 * A `layout` runs at once; without one the caller lays the graph out.
 */
export function createRunGraph({ container, doc, style, layout, missing }) {
  if (!window.cytoscape) {
    container.textContent = missing;
    return null;
  }
  // Registered once per page: cytoscape.use() complains when an extension comes twice.
  if (window.cytoscapeDagre && !window.cytoscape.__branchlineDagre) {
    window.cytoscape.use(window.cytoscapeDagre);
    window.cytoscape.__branchlineDagre = true;
  }
  const { elements } = toElements(doc);
  return window.cytoscape({
    container,
    elements,
    autoungrabify: true,
    boxSelectionEnabled: false,
    wheelSensitivity: 0.3,
    style: [...BASE_STYLE, ...style],
    ...(layout ? { layout } : {}),
  });
}

/**
 * Make the laid-out graph fill its panel: the container takes the height the graph needs at the
 * panel's width (within `minHeight`..`maxHeight`), and the graph is fitted to it, rather than a
 * small drawing in the middle of a fixed-height box.
 */
export function fillPanel(cy, { minHeight = 240, maxHeight = Math.max(520, window.innerHeight * 0.8), padding = 10 } = {}) {
  const container = cy.container();
  const bb = cy.elements().boundingBox();
  if (!container || !bb.w || !bb.h) return;
  const room = container.clientWidth - 2 * padding;
  const height = Math.round(Math.min(maxHeight, Math.max(minHeight, (room * bb.h) / bb.w + 2 * padding)));
  container.style.height = height + "px";
  cy.resize();
  cy.fit(undefined, padding);
}

/** Return the node of the step `key`. */
export function nodeOf(cy, key) {
  return cy.nodes().filter((n) => n.data("key") === key);
}

/** Return the edge of the branch named `branch` from the step `key` (empty without a name). */
export function edgeOf(cy, key, branch) {
  if (!branch) return cy.collection();
  return cy.edges().filter((e) => e.source().data("key") === key && (e.data("branch") || {}).name === branch);
}
