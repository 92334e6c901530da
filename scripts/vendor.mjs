// Copy the front-end libraries' dist files and licences from node_modules into static/vendor/.
// Run by `make vendor` after `npm ci --ignore-scripts`; static/vendor/ is not committed.
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";

const root = join(dirname(new URL(import.meta.url).pathname), "..");
const out = join(root, "static", "vendor");

// package -> files to copy (relative to the package folder)
const FILES = {
  cytoscape: ["dist/cytoscape.min.js"],
  // cytoscape-dagre 4 bundles dagre 3 in its dist file: no separate dagre script is needed.
  "cytoscape-dagre": ["dist/cytoscape-dagre.min.js"],
  "cytoscape-edgehandles": ["cytoscape-edgehandles.js"],
  // Right-click menus on steps, branches and the canvas (a list of buttons, not a radial menu).
  "cytoscape-context-menus": ["cytoscape-context-menus.js", "cytoscape-context-menus.css"],
  "cytoscape-navigator": ["cytoscape-navigator.js", "cytoscape.js-navigator.css"],
  "cytoscape-undo-redo": ["cytoscape-undo-redo.js"],
  // cytoscape-edgehandles' browser build reads `_.memoize` and `_.throttle` from the real lodash.
  lodash: ["lodash.min.js"],
};

rmSync(out, { recursive: true, force: true });
for (const [pkg, files] of Object.entries(FILES)) {
  const src = join(root, "node_modules", pkg);
  const dest = join(out, pkg);
  mkdirSync(dest, { recursive: true });
  for (const file of files) {
    const from = join(src, file);
    if (!existsSync(from)) throw new Error(`${pkg}: ${file} is missing; check the pinned version`);
    copyFileSync(from, join(dest, file.split("/").pop()));
  }
  for (const name of readdirSync(src)) {
    if (/^licen[cs]e(\.(md|txt))?$/i.test(name)) copyFileSync(join(src, name), join(dest, name));
  }
}
console.log(`vendored ${Object.keys(FILES).length} packages into static/vendor/`);
