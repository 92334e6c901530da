/*
 * layout-worker.js: lays a graph out with dagre off the page's main thread (a classic worker).
 *
 * It runs the very libraries the page runs (Cytoscape headless and cytoscape-dagre), on nodes
 * sized as the page measured them, so it places steps exactly where the page itself would.
 *
 * Message in:  {nodes: [{w, h}], edges: [[sourceIndex, targetIndex]], layout: {...dagre options}}
 * Message out: {positions: [x0, y0, x1, y1, ...]} in node order, or {error: "..."}.
 */
/* global cytoscape, cytoscapeDagre, importScripts */
importScripts("../vendor/cytoscape/cytoscape.min.js", "../vendor/cytoscape-dagre/cytoscape-dagre.min.js");
cytoscape.use(cytoscapeDagre);

// Node sizes come from the page: no label or border counts here (nodeDimensionsIncludeLabels is off).
const STYLE = [{ selector: "node", style: { width: "data(w)", height: "data(h)", "border-width": 0, padding: 0 } }];

self.onmessage = (event) => {
  try {
    const { nodes, edges, layout } = event.data;
    const elements = nodes.map((n, i) => ({ group: "nodes", data: { id: "n" + i, w: n.w, h: n.h } }));
    edges.forEach((e, i) => {
      elements.push({ group: "edges", data: { id: "e" + i, source: "n" + e[0], target: "n" + e[1] } });
    });
    const cy = cytoscape({ headless: true, styleEnabled: true, style: STYLE, elements: elements });
    cy.layout(Object.assign({}, layout, { fit: false, animate: false })).run();
    const positions = new Array(nodes.length * 2);
    cy.nodes().forEach((n, i) => {
      positions[2 * i] = n.position("x");
      positions[2 * i + 1] = n.position("y");
    });
    cy.destroy();
    self.postMessage({ positions: positions });
  } catch (exc) {
    self.postMessage({ error: String(exc && exc.message ? exc.message : exc) });
  }
};
