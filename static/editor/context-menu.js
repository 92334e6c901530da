/*
 * context-menu.js: right-click menus on the canvas (cytoscape-context-menus): on a step, edit,
 * copy, duplicate or delete it (on a human step, add its review branches); on a branch, edit or delete it; on the empty canvas, add a step
 * of a kind or paste right there, fit or lay out. Each item calls the function the tool bar,
 * palette and keys call too. The palette offers the same to the keyboard.
 */
import { selectElement } from "./canvas.js";
import { stepKinds, kindLabel } from "./catalog.js";
import { canPaste, copySelection, duplicateSelection, paste } from "./clipboard.js";
import * as store from "./store.js";
import { addReviewBranches, addStep, deleteSelected } from "./toolbar.js";

const STEP = 'node[kind = "step"]';
const BRANCH = 'edge[kind = "branch"]';
// The library draws its submenu arrow from an image; ours, so nothing is fetched.
const ARROW = "data:image/svg+xml;utf8," + encodeURIComponent(
  '<svg xmlns="http://www.w3.org/2000/svg" width="12" height="12" viewBox="0 0 12 12"><path d="M4 2l4 4-4 4" fill="none" stroke="#667085" stroke-width="1.6"/></svg>');

// The item acts on the element right-clicked: it becomes the selection first.
function onTarget(action) {
  return (evt) => {
    selectElement(evt.target.id());
    action(evt);
  };
}

function items() {
  return [
    { id: "cm-edit", content: "Edit", selector: STEP + ", " + BRANCH, onClickFunction: onTarget(() => {}) },
    { id: "cm-copy", content: "Copy", selector: STEP, onClickFunction: onTarget(copySelection) },
    { id: "cm-duplicate", content: "Duplicate", selector: STEP, onClickFunction: onTarget(duplicateSelection) },
    { id: "cm-review", content: "Add approve / reject / revise branches", selector: 'node[kind = "step"][stepKind = "human"]', onClickFunction: onTarget((evt) => addReviewBranches(evt.target)) },
    { id: "cm-delete", content: "Delete", selector: STEP + ", " + BRANCH, hasTrailingDivider: false, onClickFunction: onTarget(deleteSelected) },
    {
      id: "cm-add", content: "Add a step here", coreAsWell: true, selector: "",
      submenu: stepKinds().map((kind) => ({
        id: "cm-add-" + kind, content: kindLabel(kind),
        onClickFunction: (evt) => addStep(kind, evt.position),
      })),
    },
    { id: "cm-paste", content: "Paste here", coreAsWell: true, selector: "", onClickFunction: (evt) => paste(evt.position) },
    { id: "cm-fit", content: "Fit in view", coreAsWell: true, selector: "", onClickFunction: () => document.getElementById("btn-fit").click() },
    { id: "cm-layout", content: "Lay the steps out", coreAsWell: true, selector: "", onClickFunction: () => document.getElementById("btn-layout").click() },
  ];
}

export function initContextMenu() {
  const cy = store.graph();
  if (!cy.contextMenus) return; // the library is not installed (make vendor)
  const menu = cy.contextMenus({
    menuItems: items(),
    contextMenuClasses: ["canvas-menu"],
    menuItemClasses: ["canvas-menu-item"],
    submenuIndicator: { src: ARROW, width: 12, height: 12 },
  });
  // Paste is offered only with something to paste.
  cy.on("cxttapstart", () => {
    if (canPaste()) menu.enableMenuItem("cm-paste");
    else menu.disableMenuItem("cm-paste");
  });
}
