/*
 * run-graph.js: the read-only recipe graph that the run monitor and the run comparison draw.
 *
 * Both pages show a run's path on the recipe (recipe-graph.js converts the document) with the
 * same steps, terminals and branches; each adds the styles of its own marks on top.
 */
import { colourScheme, onColourSchemeChange } from "../editor/canvas-style.js";
import { toElements } from "../editor/recipe-graph.js";

// The graph's own colours in each scheme (canvas-style.js: the canvases follow the system's).
const BASE_COLOURS = {
  light: { node: "#f2f4f7", line: "#d0d5dd", text: "#344054", edge: "#d0d5dd", label: "#000000", labelBg: "#ffffff" },
  dark: { node: "#1d2433", line: "#4a566b", text: "#cfd4dc", edge: "#5d6b82", label: "#e6e9ef", labelBg: "#0f1420" },
};

/** Steps, terminals, steps the version no longer has, and branches, before any mark. */
export function baseStyle(scheme) {
  const c = BASE_COLOURS[scheme];
  return [
    {
      selector: "node",
      style: {
        label: "data(label)", "text-wrap": "wrap", "text-valign": "center", "font-size": 11,
        "text-max-width": 112, shape: "round-rectangle", width: 120, height: 40, "background-color": c.node,
        "border-width": 1, "border-color": c.line, color: c.text,
        // Drawn in z-index order (takenLabel raises a taken branch above them).
        "z-index-compare": "manual", "z-index": 1,
      },
    },
    { selector: 'node[kind = "terminal"]', style: { shape: "ellipse", width: 80 } },
    { selector: 'node[kind = "missing"]', style: { "border-style": "dashed", opacity: 0.6 } },
    {
      selector: "edge",
      style: {
        width: 1, "curve-style": "bezier", "line-color": c.edge,
        "target-arrow-shape": "triangle", "target-arrow-color": c.edge, "arrow-scale": 0.7,
        "z-index-compare": "manual", "z-index": 0,
      },
    },
  ];
}

/**
 * The style of a taken branch's label (the branch's `takenLabel` data) in `scheme`: drawn over
 * the nodes, as the ranks are closer than a label is long ("od_draft" was "good_draft" under
 * a step).
 */
export function takenLabel(scheme) {
  const c = BASE_COLOURS[scheme];
  return {
    label: "data(takenLabel)", "font-size": 8, color: c.label, "text-background-color": c.labelBg,
    "text-background-opacity": 1, "text-background-padding": 1, "z-index": 2,
  };
}

/** Return the layout: top to bottom with dagre where it is installed, breadthfirst otherwise. */
export function runLayout({ nodeSep, rankSep }) {
  return window.cytoscapeDagre
    ? { name: "dagre", rankDir: "TB", nodeSep, rankSep, padding: 8 }
    : { name: "breadthfirst", directed: true, padding: 8 };
}

/**
 * Draw the recipe `doc` in `container` with the base style and then `style(scheme)` (the marks'
 * rules in a colour scheme); return the Cytoscape instance, or null (saying `missing` in the
 * container) when the graph library is not installed. A `layout` runs at once; without one the
 * caller lays the graph out. The graph is restyled when the system's colour scheme changes.
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
  const sheet = (scheme) => [...baseStyle(scheme), ...style(scheme)];
  const cy = window.cytoscape({
    container,
    elements,
    autoungrabify: true,
    boxSelectionEnabled: false,
    wheelSensitivity: 0.3,
    style: sheet(colourScheme()),
    ...(layout ? { layout } : {}),
  });
  onColourSchemeChange((scheme) => cy.style(sheet(scheme)));
  return cy;
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
