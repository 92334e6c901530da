/*
 * canvas-style.js: how the canvas draws steps, branches and terminals, and how it lays them out.
 *
 * A step is a card: its kind's icon on the left, its name and "kind · actor" beside it, and its
 * lint status as a badge in the top right corner (with the border colour). Sizes are chosen for
 * reading at the initial fit: the fit never goes below MIN_FIT_ZOOM, where a node label is
 * NODE_FONT × MIN_FIT_ZOOM ≥ 11 px on screen. Zoomed out further, labels give way to the cards'
 * colours and icons (level of detail) rather than drawing unreadable text.
 */
export const NODE_FONT = 15;
export const EDGE_FONT = 13;
/** The smallest zoom of the initial fit (and of `fit`): node labels at ≥ 11 px on screen. */
export const MIN_FIT_ZOOM = 0.8;
export const MAX_FIT_ZOOM = 1.2;

// Each kind's colours and a 24×24 icon (stroked paths, drawn in the kind's colour).
const KINDS = {
  llm: { bg: "#eef4ff", line: "#2f5bea", icon: '<path d="M12 3l2.2 6.8L21 12l-6.8 2.2L12 21l-2.2-6.8L3 12l6.8-2.2z"/>' },
  human: { bg: "#fffaeb", line: "#dc6803", icon: '<circle cx="12" cy="8" r="4"/><path d="M4 21c0-4.5 3.6-7 8-7s8 2.5 8 7"/>' },
  decision_tree: { bg: "#f4f3ff", line: "#7a5af8", icon: '<circle cx="12" cy="4.5" r="2"/><circle cx="5" cy="19" r="2"/><circle cx="19" cy="19" r="2"/><path d="M12 6.5v5M12 11.5L5 17M12 11.5l7 5.5"/>' },
  classify: { bg: "#ecfdf3", line: "#039855", icon: '<path d="M3 3h8l10 10-8 8L3 11z"/><circle cx="7.5" cy="7.5" r="1.5"/>' },
  intent: { bg: "#fdf2fa", line: "#c11574", icon: '<circle cx="12" cy="12" r="9"/><circle cx="12" cy="12" r="5"/><circle cx="12" cy="12" r="1.2"/>' },
  retrieve: { bg: "#f0f9ff", line: "#0086c9", icon: '<circle cx="10" cy="10" r="6"/><path d="M14.5 14.5L21 21"/>' },
  tool: { bg: "#f9fafb", line: "#475467", icon: '<path d="M8 3C5 3 5 5 5 8s-2 4-2 4 2 1 2 4 0 5 3 5M16 3c3 0 3 2 3 5s2 4 2 4-2 1-2 4 0 5-3 5"/>' },
};

function svg(body, color, fill) {
  const doc = '<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24" viewBox="0 0 24 24" fill="' + (fill || "none") +
    '" stroke="' + color + '" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">' + body + "</svg>";
  return "data:image/svg+xml;utf8," + encodeURIComponent(doc);
}

/** Return a step kind's icon as an image URL (the canvas's own, for lists beside it). */
export function kindIcon(kind) {
  const k = KINDS[kind] || KINDS.tool;
  return svg(k.icon, k.line);
}

const BADGES = {
  "has-error": svg('<circle cx="12" cy="12" r="10" fill="#d92d20" stroke="#fff"/><path d="M12 7v6M12 16.5v.5" stroke="#fff"/>', "#fff"),
  "has-warning": svg('<path d="M12 2L23 21H1z" fill="#f79009" stroke="#fff"/><path d="M12 9v5M12 17.5v.5" stroke="#fff"/>', "#fff"),
};

// Background images of a card: [icon] or [icon, badge], with where and how big each is drawn.
function cardImages(kind, badge) {
  const images = [svg(KINDS[kind].icon, KINDS[kind].line)];
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

function kindRules() {
  const rules = [];
  Object.keys(KINDS).forEach((kind) => {
    const k = KINDS[kind];
    rules.push({
      selector: "node.kind-" + kind,
      style: Object.assign({ "background-color": k.bg, "border-color": k.line }, cardImages(kind, null)),
    });
  });
  // After every kind, so a badge is added to whichever icon the kind drew.
  ["has-warning", "has-error"].forEach((badge) => {
    Object.keys(KINDS).forEach((kind) => {
      rules.push({ selector: "node.kind-" + kind + "." + badge, style: cardImages(kind, badge) });
    });
  });
  return rules;
}

// Runs on the canvas (runs-overlay.js): a branch's heat, by how often the runs took it against
// the most taken, from the first (least) to the last (most); arrows kept in proportion.
export const HEAT = [
  { color: "#84caff", width: 2.5, arrow: 0.8 },
  { color: "#53b1fd", width: 3.5, arrow: 0.7 },
  { color: "#2e90fa", width: 4.5, arrow: 0.62 },
  { color: "#1570ef", width: 6, arrow: 0.55 },
  { color: "#1849a9", width: 7.5, arrow: 0.5 },
];

function runsRules() {
  const heat = HEAT.map((h, i) => ({
    selector: "edge.runs-heat-" + (i + 1),
    style: { width: h.width, "line-color": h.color, "target-arrow-color": h.color, "arrow-scale": h.arrow, "line-style": "solid", opacity: 1 },
  }));
  return [
    // The count is a line of the label, and a click on the label is a click on the branch.
    { selector: "node.runs-count, edge.runs-count", style: { label: "data(runsLabel)" } },
    { selector: "edge.runs-count", style: { "text-events": "yes" } },
    ...heat,
    { selector: "edge.runs-zero, edge.runs-absent", style: { opacity: 0.45, "line-color": "#98a2b3", "target-arrow-color": "#98a2b3", width: 1.4 } },
    { selector: "edge.runs-absent", style: { "line-style": "dashed" } },
    { selector: "node.runs-none", style: { opacity: 0.6 } },
  ];
}

export const STYLE = [
  {
    selector: "node",
    style: {
      label: "data(label)", "text-wrap": "wrap", "text-max-width": 128, "text-valign": "center",
      "text-halign": "center", "font-size": NODE_FONT, "font-family": "system-ui, sans-serif",
      "line-height": 1.2, width: 176, height: 68, shape: "round-rectangle", "background-color": "#ffffff",
      "border-width": 1.5, "border-color": "#98a2b3", color: "#1d2330",
      // Level of detail: below 8 px on screen the text is not drawn (the card keeps its icon).
      "min-zoomed-font-size": 8,
    },
  },
  { selector: "node.step", style: { "text-margin-x": 14, "text-justification": "left" } },
  ...kindRules(),
  { selector: "node.kind-decision_tree", style: { shape: "cut-rectangle" } },
  { selector: "node.kind-classify", style: { shape: "round-tag" } },
  { selector: "node.first", style: { "border-width": 3.5 } },
  {
    selector: "node.terminal",
    style: { width: 120, height: 54, "font-weight": "bold", shape: "round-octagon", "text-max-width": 110 },
  },
  { selector: "node.terminal.end", style: { "background-color": "#fef3f2", "border-color": "#d92d20", color: "#912018" } },
  { selector: "node.terminal.complete", style: { "background-color": "#ecfdf3", "border-color": "#039855", color: "#05603a", shape: "ellipse" } },
  {
    selector: "node.missing",
    style: { "border-style": "dashed", "border-color": "#d92d20", color: "#b42318", width: 150, height: 44, "text-max-width": 140 },
  },
  {
    selector: "edge",
    style: {
      "curve-style": "bezier", "target-arrow-shape": "triangle", width: 1.6, "line-color": "#98a2b3",
      "target-arrow-color": "#98a2b3", label: "data(label)", "font-size": EDGE_FONT, "text-wrap": "wrap",
      "text-background-color": "#ffffff", "text-background-opacity": 0.92, "text-background-padding": 2,
      "text-background-shape": "roundrectangle", "min-zoomed-font-size": 8, color: "#344054", "arrow-scale": 0.9,
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
  { selector: "edge.leaf", style: { "line-style": "dashed", "line-color": "#7a5af8", "target-arrow-color": "#7a5af8", "font-style": "italic", color: "#5925dc" } },
  { selector: ".has-warning", style: { "border-color": "#f79009", "line-color": "#f79009", "target-arrow-color": "#f79009" } },
  { selector: ".has-error", style: { "border-color": "#d92d20", "line-color": "#d92d20", "target-arrow-color": "#d92d20", "border-style": "dashed" } },
  { selector: "node.run-visited", style: { "background-color": "#d1fadf", "border-color": "#039855", "border-width": 3 } },
  { selector: "node.run-failed", style: { "background-color": "#fee4e2", "border-color": "#d92d20", "border-width": 3 } },
  { selector: "node.run-current", style: { "border-color": "#f79009", "border-width": 5 } },
  { selector: "edge.run-taken", style: { width: 4, "line-color": "#039855", "target-arrow-color": "#039855", color: "#05603a" } },
  { selector: "edge.run-lost", style: { opacity: 0.3, "line-color": "#98a2b3", "target-arrow-color": "#98a2b3" } },
  { selector: "edge.uncovered", style: { "line-style": "dashed", width: 3, "line-color": "#f79009", "target-arrow-color": "#f79009" } },
  { selector: "edge.covered", style: { width: 3, "line-color": "#12b76a", "target-arrow-color": "#12b76a" } },
  ...runsRules(),
  { selector: "node:selected", style: { "border-color": "#f79009", "border-width": 4, "overlay-opacity": 0.06 } },
  { selector: "edge:selected", style: { "line-color": "#f79009", "target-arrow-color": "#f79009", width: 3.5, "z-index": 10 } },
  { selector: ".eh-ghost-edge, edge.eh-preview", style: { "line-color": "#f79009", "target-arrow-color": "#f79009", "line-style": "dashed", width: 2, label: "" } },
  { selector: ".eh-ghost-node", style: { opacity: 0 } },
  { selector: "node.eh-target, node.eh-hover", style: { "border-color": "#f79009", "border-width": 4 } },
];

export const LAYOUT = { name: "dagre", rankDir: "LR", nodeSep: 34, rankSep: 110, edgeSep: 14, fit: true, padding: 30, animate: false };
