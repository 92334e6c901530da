/*
 * layout.js: places a recipe whose steps have no saved position when the editor opens.
 *
 * Laying out 1,000 steps with dagre takes about a second, so it never runs on the page's main
 * thread on open: the positions come from this browser's cache of earlier layouts of the same
 * graph (same steps, branches, style and options) or from a worker (layout-worker.js).
 * Only without workers does it fall back to laying out in the page. The cache lives in
 * localStorage, so opening a recipe changes nothing in its draft.
 */

const CACHE_PREFIX = "branchline.layout.";
const CACHE_INDEX = "branchline.layouts";
// Enough for the recipes one author has open in turn; each entry is ~16 bytes a node.
const CACHE_ENTRIES = 20;

/** Return the graph to lay out: node sizes and edges by node index, in the instance's order. */
export function layoutInput(cy) {
  const nodes = cy.nodes();
  const index = {};
  const sized = nodes.map((n, i) => {
    index[n.id()] = i;
    const d = n.layoutDimensions({ nodeDimensionsIncludeLabels: false });
    return { w: d.w, h: d.h };
  });
  return { nodes: sized, edges: edgeIndexes(cy, index) };
}

function edgeIndexes(cy, index) {
  return cy.edges().map((e) => [index[e.source().id()], index[e.target().id()]]);
}

// Two 32-bit FNV-1a hashes with different seeds: a 64-bit key, collisions out of reach.
function fnv(text, seed) {
  let h = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 16777619) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

/**
 * Return the cache key of laying out `cy` with `layout`: what the layout reads, never the
 * random element ids. Node sizes follow from the style sheet and each node's classes, so
 * those stand in for them: measuring 1,000 nodes would cost as much as the cache saves.
 */
export function layoutKey(cy, style, layout) {
  const index = {};
  const names = cy.nodes().map((n, i) => {
    index[n.id()] = i;
    return n.data("kind") + ":" + (n.data("key") || n.data("terminal") || n.data("label") || "") + ":" + n.classes().join(".");
  });
  const text = JSON.stringify([layout, style, names, edgeIndexes(cy, index)]);
  return fnv(text, 2166136261) + fnv(text, 0x9e3779b9) + "-" + names.length;
}

function readCache(key, count) {
  try {
    const raw = window.localStorage.getItem(CACHE_PREFIX + key);
    const positions = raw ? JSON.parse(raw) : null;
    return Array.isArray(positions) && positions.length === 2 * count ? positions : null;
  } catch (exc) {
    return null; // storage disabled or an entry from elsewhere: lay out again
  }
}

function writeCache(key, positions) {
  try {
    const storage = window.localStorage;
    const index = (JSON.parse(storage.getItem(CACHE_INDEX) || "[]") || []).filter((k) => k !== key);
    index.unshift(key);
    index.splice(CACHE_ENTRIES).forEach((old) => storage.removeItem(CACHE_PREFIX + old));
    storage.setItem(CACHE_PREFIX + key, JSON.stringify(positions.map((v) => Math.round(v))));
    storage.setItem(CACHE_INDEX, JSON.stringify(index));
  } catch (exc) {
    // Full or disabled storage only costs the next open a layout.
  }
}

function applyPositions(cy, positions) {
  // Through a preset layout, as a layout places nodes: Cytoscape then refreshes what it keeps
  // of them (bounds, hit testing) the way it does after dagre.
  const index = {};
  cy.nodes().forEach((n, i) => {
    index[n.id()] = i;
  });
  cy.layout({
    name: "preset",
    fit: false,
    animate: false,
    positions: (n) => ({ x: positions[2 * index[n.id()]], y: positions[2 * index[n.id()] + 1] }),
  }).run();
}

function layOutInWorker(input, layout) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL("./layout-worker.js", import.meta.url));
    const done = (fn, value) => {
      worker.terminate();
      fn(value);
    };
    worker.onmessage = (event) => {
      if (event.data.error) done(reject, new Error(event.data.error));
      else done(resolve, event.data.positions);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      done(reject, new Error(event.message || "the layout worker failed"));
    };
    worker.postMessage({ nodes: input.nodes, edges: input.edges, layout: layout });
  });
}

/**
 * Place every node of `cy` (drawn with `style`) by `layout` (dagre options): from the cache at
 * once, else in a worker. Return a promise of where the positions came from: "cache",
 * "worker" or "page".
 */
export function layOutOnOpen(cy, style, layout) {
  const key = layoutKey(cy, style, layout);
  const count = cy.nodes().length;
  const cached = readCache(key, count);
  if (cached) {
    applyPositions(cy, cached);
    return Promise.resolve("cache");
  }
  const inPage = () => {
    cy.layout(Object.assign({}, layout, { fit: false })).run();
    return "page";
  };
  const laidOut = typeof Worker === "undefined"
    ? Promise.resolve(inPage())
    : layOutInWorker(layoutInput(cy), layout).then((positions) => {
      // Nothing may be added before the page is ready; if it were, the indexes would be off.
      if (cy.nodes().length !== count) return inPage();
      applyPositions(cy, positions);
      return "worker";
    }, inPage);
  return laidOut.then((source) => {
    writeCache(key, cy.nodes().map((n) => [n.position("x"), n.position("y")]).flat());
    return source;
  });
}
