/*
 * canvas-style.js: how the canvas draws steps, branches and terminals, and how it lays them out.
 *
 * A step is a card: its kind's icon on the left, its name and "kind · actor" beside it, and its
 * lint status as a badge in the top right corner (with the border colour). Sizes are chosen for
 * reading at the initial fit: the fit never goes below MIN_FIT_ZOOM, where a node label is
 * NODE_FONT × MIN_FIT_ZOOM ≥ 11 px on screen. Zoomed out further, labels give way to the cards'
 * colours and icons (level of detail) rather than drawing unreadable text.
 */
export const NODE_FONT = 16;
export const EDGE_FONT = 14;
/** How wide a branch label is drawn before it wraps: narrower than the layout's rank gap. */
export const EDGE_LABEL_WIDTH = 112;
/** The smallest zoom of the initial fit (and of `fit`): node labels at ≥ 11 px on screen. */
export const MIN_FIT_ZOOM = 0.8;
export const MAX_FIT_ZOOM = 1.2;
/** The smallest zoom at which a fit still shows the whole graph (node labels ≥ 8 px). */
export const WHOLE_FIT_ZOOM = 0.5;

// Each kind's 24×24 icon (stroked paths, drawn in the kind's colour).
const ICONS = {
  llm: '<path d="M12 3l2.2 6.8L21 12l-6.8 2.2L12 21l-2.2-6.8L3 12l6.8-2.2z"/>',
  human: '<circle cx="12" cy="8" r="4"/><path d="M4 21c0-4.5 3.6-7 8-7s8 2.5 8 7"/>',
  decision_tree: '<circle cx="12" cy="4.5" r="2"/><circle cx="5" cy="19" r="2"/><circle cx="19" cy="19" r="2"/><path d="M12 6.5v5M12 11.5L5 17M12 11.5l7 5.5"/>',
  classify: '<path d="M3 3h8l10 10-8 8L3 11z"/><circle cx="7.5" cy="7.5" r="1.5"/>',
  intent: '<circle cx="12" cy="12" r="9"/><circle cx="12" cy="12" r="5"/><circle cx="12" cy="12" r="1.2"/>',
  retrieve: '<circle cx="10" cy="10" r="6"/><path d="M14.5 14.5L21 21"/>',
  tool: '<path d="M8 3C5 3 5 5 5 8s-2 4-2 4 2 1 2 4 0 5 3 5M16 3c3 0 3 2 3 5s2 4 2 4-2 1-2 4 0 5-3 5"/>',
  transform: '<path d="M4 7h13l-3-3M20 17H7l3 3"/>',
  http: '<circle cx="12" cy="12" r="9"/><path d="M3 12h18M12 3c2.5 2.5 3.8 5.5 3.8 9s-1.3 6.5-3.8 9M12 3c-2.5 2.5-3.8 5.5-3.8 9s1.3 6.5 3.8 9"/>',
};

/*
 * The canvases' colours in each scheme. They follow the system setting as the page does
 * (branchline.css); Cytoscape draws on a <canvas>, where CSS variables do not reach. In dark
 * mode a card is a dark tint of its kind with a lighter line, and text stays above 4.5:1.
 */
const PALETTES = {
  light: {
    kinds: {
      llm: { bg: "#eef4ff", line: "#2f5bea" },
      human: { bg: "#fffaeb", line: "#dc6803" },
      decision_tree: { bg: "#f4f3ff", line: "#7a5af8" },
      classify: { bg: "#ecfdf3", line: "#039855" },
      intent: { bg: "#fdf2fa", line: "#c11574" },
      retrieve: { bg: "#f0f9ff", line: "#0086c9" },
      tool: { bg: "#f9fafb", line: "#475467" },
      transform: { bg: "#f0fdf9", line: "#0e9384" },
      http: { bg: "#f5fbee", line: "#4f7a21" },
    },
    node: "#ffffff", nodeLine: "#98a2b3", text: "#1d2330",
    edge: "#98a2b3", edgeText: "#344054", labelBg: "#ffffff",
    end: { bg: "#fef3f2", line: "#d92d20", text: "#912018" },
    complete: { bg: "#ecfdf3", line: "#039855", text: "#05603a" },
    missing: { line: "#d92d20", text: "#b42318" },
    leaf: { line: "#7a5af8", text: "#5925dc" },
    warning: "#f79009", error: "#d92d20", selected: "#f79009",
    visited: { bg: "#d1fadf", line: "#039855" }, failed: { bg: "#fee4e2", line: "#d92d20" },
    taken: { line: "#039855", text: "#05603a" }, covered: "#12b76a",
    heat: ["#84caff", "#53b1fd", "#2e90fa", "#1570ef", "#1849a9"],
  },
  dark: {
    kinds: {
      llm: { bg: "#1a2647", line: "#8cb0ff" },
      human: { bg: "#3a2a0c", line: "#f5a545" },
      decision_tree: { bg: "#261f4d", line: "#a795ff" },
      classify: { bg: "#0c3324", line: "#47cd89" },
      intent: { bg: "#3d1230", line: "#f27ac0" },
      retrieve: { bg: "#0b2c40", line: "#5cc1f5" },
      tool: { bg: "#1f2633", line: "#b0b9c8" },
      transform: { bg: "#0a2e2b", line: "#2ed3b7" },
      http: { bg: "#1f2e12", line: "#86cb3c" },
    },
    node: "#171d2b", nodeLine: "#5d6b82", text: "#e6e9ef",
    edge: "#7d8aa0", edgeText: "#cfd4dc", labelBg: "#0b1019",
    end: { bg: "#4a1a14", line: "#ff8a7a", text: "#ffc9c0" },
    complete: { bg: "#0b3b26", line: "#47cd89", text: "#a6f4c5" },
    missing: { line: "#ff8a7a", text: "#ffb4a8" },
    leaf: { line: "#a795ff", text: "#c9bdff" },
    warning: "#f5b546", error: "#ff8a7a", selected: "#f5b546",
    visited: { bg: "#0b3b26", line: "#47cd89" }, failed: { bg: "#4a1a14", line: "#ff8a7a" },
    taken: { line: "#47cd89", text: "#a6f4c5" }, covered: "#47cd89",
    heat: ["#274a8c", "#3563c9", "#4f86f7", "#8cb0ff", "#cfdcff"],
  },
};

const DARK = "(prefers-color-scheme: dark)";

/** Return the colour scheme the system asks for: "dark" or "light". */
export function colourScheme() {
  return window.matchMedia && window.matchMedia(DARK).matches ? "dark" : "light";
}

/** Call `restyle(scheme)` each time the system's colour scheme changes. */
export function onColourSchemeChange(restyle) {
  if (window.matchMedia) window.matchMedia(DARK).addEventListener("change", () => restyle(colourScheme()));
}

function svg(body, color, fill) {
  const doc = '<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24" viewBox="0 0 24 24" fill="' + (fill || "none") +
    '" stroke="' + color + '" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">' + body + "</svg>";
  return "data:image/svg+xml;utf8," + encodeURIComponent(doc);
}

/** Return a step kind's icon as an image URL (the canvas's own, for lists beside it). */
export function kindIcon(kind, scheme = colourScheme()) {
  const known = kind in ICONS ? kind : "tool";
  return svg(ICONS[known], PALETTES[scheme].kinds[known].line);
}

const BADGES = {
  "has-error": svg('<circle cx="12" cy="12" r="10" fill="#d92d20" stroke="#fff"/><path d="M12 7v6M12 16.5v.5" stroke="#fff"/>', "#fff"),
  "has-warning": svg('<path d="M12 2L23 21H1z" fill="#f79009" stroke="#fff"/><path d="M12 9v5M12 17.5v.5" stroke="#fff"/>', "#fff"),
};

// Background images of a card: [icon] or [icon, badge], with where and how big each is drawn.
function cardImages(kind, badge, scheme) {
  const images = [kindIcon(kind, scheme)];
  if (badge) images.push(BADGES[badge]);
  const pick = (icon, mark) => (badge ? [icon, mark] : [icon]);
  return {
    "background-image": images,
    "background-fit": pick("none", "none"),
    "background-clip": pick("none", "none"),
    "background-width": pick(22, 18),
    "background-height": pick(22, 18),
    "background-position-x": pick(10, "100%"),
    "background-position-y": pick("50%", 0),
    "background-offset-x": pick(0, -3),
    "background-offset-y": pick(0, 3),
    "background-image-containment": pick("inside", "inside"),
    "bounds-expansion": 0,
  };
}

function kindRules(scheme) {
  const rules = [];
  Object.entries(PALETTES[scheme].kinds).forEach(([kind, k]) => {
    rules.push({
      selector: "node.kind-" + kind,
      style: Object.assign({ "background-color": k.bg, "border-color": k.line }, cardImages(kind, null, scheme)),
    });
  });
  // After every kind, so a badge is added to whichever icon the kind drew.
  ["has-warning", "has-error"].forEach((badge) => {
    Object.keys(ICONS).forEach((kind) => {
      rules.push({ selector: "node.kind-" + kind + "." + badge, style: cardImages(kind, badge, scheme) });
    });
  });
  return rules;
}

// Runs on the canvas (runs-overlay.js): a branch's heat, by how often the runs took it against
// the most taken, from the first (least) to the last (most); arrows kept in proportion.
const HEAT_SIZES = [
  { width: 2.5, arrow: 0.8 },
  { width: 3.5, arrow: 0.7 },
  { width: 4.5, arrow: 0.62 },
  { width: 6, arrow: 0.55 },
  { width: 7.5, arrow: 0.5 },
];

/** How many levels of heat a branch can have. */
export const HEAT_LEVELS = HEAT_SIZES.length;

/** Return the heat scale in `scheme`: each level's colour, line width and arrow scale. */
export function heatScale(scheme = colourScheme()) {
  return HEAT_SIZES.map((size, i) => ({ color: PALETTES[scheme].heat[i], ...size }));
}

function runsRules(scheme) {
  const c = PALETTES[scheme];
  const heat = heatScale(scheme).map((h, i) => ({
    selector: "edge.runs-heat-" + (i + 1),
    style: { width: h.width, "line-color": h.color, "target-arrow-color": h.color, "arrow-scale": h.arrow, "line-style": "solid", opacity: 1 },
  }));
  return [
    // The count is a line of the label, and a click on the label is a click on the branch.
    { selector: "node.runs-count, edge.runs-count", style: { label: "data(runsLabel)" } },
    { selector: "edge.runs-count", style: { "text-events": "yes" } },
    ...heat,
    { selector: "edge.runs-zero, edge.runs-absent", style: { opacity: 0.45, "line-color": c.edge, "target-arrow-color": c.edge, width: 1.4 } },
    { selector: "edge.runs-absent", style: { "line-style": "dashed" } },
    { selector: "node.runs-none", style: { opacity: 0.6 } },
  ];
}

/** Return the canvas's style sheet in `scheme` ("light" or "dark"). */
export function canvasStyle(scheme = colourScheme()) {
  const c = PALETTES[scheme];
  return [
    {
      selector: "node",
      style: {
        label: "data(label)", "text-wrap": "wrap", "text-max-width": 128, "text-valign": "center",
        "text-halign": "center", "font-size": NODE_FONT, "font-family": "system-ui, sans-serif",
        "line-height": 1.2, width: 176, height: 68, shape: "round-rectangle", "background-color": c.node,
        "border-width": 1.5, "border-color": c.nodeLine, color: c.text,
        // Level of detail: below 8 px on screen the text is not drawn (the card keeps its icon).
        "min-zoomed-font-size": 8,
      },
    },
    { selector: "node.step", style: { "text-margin-x": 14, "text-justification": "left" } },
    ...kindRules(scheme),
    { selector: "node.kind-decision_tree", style: { shape: "cut-rectangle" } },
    { selector: "node.kind-classify", style: { shape: "round-tag" } },
    { selector: "node.first", style: { "border-width": 3.5 } },
    {
      selector: "node.terminal",
      style: { width: 120, height: 54, "font-weight": "bold", shape: "round-octagon", "text-max-width": 110 },
    },
    { selector: "node.terminal.end", style: { "background-color": c.end.bg, "border-color": c.end.line, color: c.end.text } },
    { selector: "node.terminal.complete", style: { "background-color": c.complete.bg, "border-color": c.complete.line, color: c.complete.text, shape: "ellipse" } },
    {
      selector: "node.missing",
      style: { "border-style": "dashed", "border-color": c.missing.line, color: c.missing.text, width: 150, height: 44, "text-max-width": 140 },
    },
    {
      selector: "edge",
      style: {
        "curve-style": "bezier", "target-arrow-shape": "triangle", width: 1.6, "line-color": c.edge,
        "target-arrow-color": c.edge, label: "data(label)", "font-size": EDGE_FONT, "text-wrap": "wrap",
        "text-background-color": c.labelBg, "text-background-opacity": 0.92, "text-background-padding": 2,
        "text-background-shape": "roundrectangle", "min-zoomed-font-size": 8, color: c.edgeText, "arrow-scale": 0.9,
        // Labels in words wrap to fit between two steps a layout rank apart.
        "text-max-width": EDGE_LABEL_WIDTH,
        // Parallel branches fan out far enough apart for their two-line labels to clear each other.
        "control-point-step-size": 84,
      },
    },
    { selector: "edge:loop", style: { "loop-direction": "-30deg", "loop-sweep": "-70deg", "control-point-step-size": 84 } },
    // A label that would pile onto another branch's (canvas.js spreadEdgeLabels) shows on hover.
    { selector: "edge.label-crowded", style: { "text-opacity": 0, "text-background-opacity": 0 } },
    {
      selector: "edge.label-crowded.hovered",
      style: { "text-opacity": 1, "text-background-opacity": 0.92, "z-index-compare": "manual", "z-index": 20 },
    },
    { selector: "edge.inactive", style: { "line-style": "dotted", opacity: 0.55 } },
    // The implicit next step (recipe-graph.js sequenceEdges): where a step goes when no branch is taken.
    { selector: "edge.sequence", style: { "line-style": "dashed", "line-dash-pattern": [6, 4], width: 1.3, "line-color": c.edge, "target-arrow-color": c.edge, "target-arrow-shape": "vee", label: "" } },
    { selector: "edge.leaf", style: { "line-style": "dashed", "line-color": c.leaf.line, "target-arrow-color": c.leaf.line, "font-style": "italic", color: c.leaf.text } },
    { selector: ".has-warning", style: { "border-color": c.warning, "line-color": c.warning, "target-arrow-color": c.warning } },
    { selector: ".has-error", style: { "border-color": c.error, "line-color": c.error, "target-arrow-color": c.error, "border-style": "dashed" } },
    { selector: "node.run-visited", style: { "background-color": c.visited.bg, "border-color": c.visited.line, "border-width": 3 } },
    { selector: "node.run-failed", style: { "background-color": c.failed.bg, "border-color": c.failed.line, "border-width": 3 } },
    { selector: "node.run-current", style: { "border-color": c.selected, "border-width": 5 } },
    { selector: "edge.run-taken", style: { width: 4, "line-color": c.taken.line, "target-arrow-color": c.taken.line, color: c.taken.text } },
    { selector: "edge.run-lost", style: { opacity: 0.3, "line-color": c.edge, "target-arrow-color": c.edge } },
    { selector: "edge.uncovered", style: { "line-style": "dashed", width: 3, "line-color": c.warning, "target-arrow-color": c.warning } },
    { selector: "edge.covered", style: { width: 3, "line-color": c.covered, "target-arrow-color": c.covered } },
    ...runsRules(scheme),
    { selector: "node:selected", style: { "border-color": c.selected, "border-width": 4, "overlay-opacity": 0.06 } },
    { selector: "edge:selected", style: { "line-color": c.selected, "target-arrow-color": c.selected, width: 3.5, "z-index": 10 } },
    { selector: ".eh-ghost-edge, edge.eh-preview", style: { "line-color": c.selected, "target-arrow-color": c.selected, "line-style": "dashed", width: 2, label: "" } },
    { selector: ".eh-ghost-node", style: { opacity: 0 } },
    { selector: "node.eh-target, node.eh-hover", style: { "border-color": c.selected, "border-width": 4 } },
  ];
}

/** The sizes are the same in every scheme: the layout, and its cache's key, read this sheet. */
export const LAYOUT_STYLE = canvasStyle("light");

export const LAYOUT = { name: "dagre", rankDir: "LR", nodeSep: 34, rankSep: 140, edgeSep: 14, fit: true, padding: 30, animate: false };
