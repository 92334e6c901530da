/*
 * sources.js: the step panel's Sources section, a Django formset (prefix `sources`): "Add a
 * source" copies the row template, "Remove" drops a row, and the rows are renumbered so that
 * the posted names run from 0 as the formset expects. "Try" is an htmx button of each row.
 */

import { edited } from "./panel-edits.js";

const ROW_NAME = /sources-(\d+|__prefix__)-/g;

function renumber(section) {
  const rows = section.querySelectorAll("[data-source-rows] > [data-source-row]");
  rows.forEach((row, i) => {
    row.setAttribute("aria-label", "Source " + (i + 1));
    row.querySelectorAll("[name], [id], label[for], [aria-describedby]").forEach((el) => {
      ["name", "id", "for", "aria-describedby"].forEach((attr) => {
        const value = el.getAttribute(attr);
        if (value) el.setAttribute(attr, value.replace(ROW_NAME, "sources-" + i + "-"));
      });
    });
    const tryButton = row.querySelector("[data-source-prefix]");
    if (tryButton) tryButton.value = "sources-" + i;
  });
  const total = section.querySelector('[name="sources-TOTAL_FORMS"]');
  const initial = section.querySelector('[name="sources-INITIAL_FORMS"]');
  total.value = String(rows.length);
  // Rows counted as "initial" must be filled in; after a removal there are fewer of them.
  if (Number(initial.value) > rows.length) initial.value = String(rows.length);
}

function addRow(section) {
  const template = section.querySelector("template[data-source-template]");
  const rows = section.querySelector("[data-source-rows]");
  const row = template.content.firstElementChild.cloneNode(true);
  rows.appendChild(row);
  renumber(section);
  htmx.process(row);
  const first = row.querySelector("select, input, textarea");
  if (first) first.focus();
}

function removeRow(section, row) {
  const form = section.closest("form");
  row.remove();
  renumber(section);
  if (form) edited(form, null); // a row taken away is an edit, applied as one
  const add = section.querySelector("[data-source-add]");
  if (add) add.focus();
}

/** Handle the Sources section's buttons inside `panel` (its forms are swapped in and out). */
export function initSources(panel) {
  panel.addEventListener("click", (evt) => {
    const section = evt.target.closest("fieldset.sources");
    if (!section) return;
    if (evt.target.closest("[data-source-add]")) {
      addRow(section);
    } else if (evt.target.closest("[data-source-remove]")) {
      removeRow(section, evt.target.closest("[data-source-row]"));
    }
  });
  // The section renders its rows numbered already; on first show, the labels are set.
  document.body.addEventListener("htmx:afterSwap", (evt) => {
    const section = evt.detail.target && evt.detail.target.querySelector
      ? evt.detail.target.querySelector("fieldset.sources")
      : null;
    if (section) renumber(section);
  });
}
