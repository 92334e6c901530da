/*
 * tools.js: the step panel's tool call. Picking a tool fetches its argument fields (one per
 * property of the tool's input schema), keeping the values typed so far; the Tools section of
 * an llm step is plain checkboxes and needs nothing here.
 */

/** Fetch the argument fields of the tool chosen in `picker` into its section. */
function loadArguments(picker, url) {
  const section = picker.closest("fieldset.tool-call");
  const target = section ? section.querySelector("[data-tool-arguments]") : null;
  if (!target || !url) return;
  // The post carries the panel's fields (htmx includes the enclosing form): the typed arguments.
  htmx.ajax("POST", url, { source: picker, target: target, swap: "innerHTML" });
}

/** Handle the tool picker inside `panel` (its forms are swapped in and out). */
export function initTools(panel, urls) {
  panel.addEventListener("change", (evt) => {
    const picker = evt.target.closest("[data-tool-picker]");
    if (picker) loadArguments(picker, urls.toolArguments);
  });
}
