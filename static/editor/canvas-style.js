/*
 * canvas-style.js: how the canvas draws steps, branches and terminals, and how it lays them out.
 */
export const STYLE = [
  {
    selector: "node",
    style: {
      label: "data(label)", "text-wrap": "wrap", "text-max-width": 168, "text-valign": "center",
      "text-halign": "center", "font-size": 12, "font-family": "system-ui, sans-serif",
      width: 180, height: 54, shape: "round-rectangle", "background-color": "#ffffff",
      "border-width": 1.5, "border-color": "#98a2b3", color: "#1d2330", "min-zoomed-font-size": 6,
    },
  },
  { selector: "node.kind-llm", style: { "background-color": "#eef4ff", "border-color": "#2f5bea" } },
  { selector: "node.kind-human", style: { "background-color": "#fffaeb", "border-color": "#dc6803" } },
  { selector: "node.kind-decision_tree", style: { "background-color": "#f4f3ff", "border-color": "#7a5af8", shape: "cut-rectangle" } },
  { selector: "node.kind-classify", style: { "background-color": "#ecfdf3", "border-color": "#039855", shape: "round-tag" } },
  { selector: "node.kind-intent", style: { "background-color": "#fdf2fa", "border-color": "#c11574" } },
  { selector: "node.first", style: { "border-width": 3.5 } },
  {
    selector: "node.terminal",
    style: { width: 96, height: 44, "font-size": 11, "font-weight": "bold", shape: "round-octagon" },
  },
  { selector: "node.terminal.end", style: { "background-color": "#fef3f2", "border-color": "#d92d20", color: "#912018" } },
  { selector: "node.terminal.complete", style: { "background-color": "#ecfdf3", "border-color": "#039855", color: "#05603a", shape: "ellipse" } },
  {
    selector: "node.missing",
    style: { "border-style": "dashed", "border-color": "#d92d20", color: "#b42318", width: 120, height: 36, "font-size": 11 },
  },
  {
    selector: "edge",
    style: {
      "curve-style": "bezier", "target-arrow-shape": "triangle", width: 1.6, "line-color": "#98a2b3",
      "target-arrow-color": "#98a2b3", label: "data(label)", "font-size": 10, "text-wrap": "wrap",
      "text-background-color": "#ffffff", "text-background-opacity": 0.9, "text-background-padding": 2,
      "min-zoomed-font-size": 7, color: "#344054", "arrow-scale": 0.9,
    },
  },
  { selector: "edge:loop", style: { "loop-direction": "-30deg", "loop-sweep": "-70deg", "control-point-step-size": 70 } },
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
  { selector: "node:selected", style: { "border-color": "#f79009", "border-width": 4, "overlay-opacity": 0.06 } },
  { selector: "edge:selected", style: { "line-color": "#f79009", "target-arrow-color": "#f79009", width: 3.5, "z-index": 10 } },
  { selector: ".eh-ghost-edge, edge.eh-preview", style: { "line-color": "#f79009", "target-arrow-color": "#f79009", "line-style": "dashed", width: 2, label: "" } },
  { selector: ".eh-ghost-node", style: { opacity: 0 } },
  { selector: "node.eh-target, node.eh-hover", style: { "border-color": "#f79009", "border-width": 4 } },
];

export const LAYOUT = { name: "dagre", rankDir: "LR", nodeSep: 28, rankSep: 90, edgeSep: 12, fit: true, padding: 30, animate: false };
