/*
 * versions.js: the versions panel (in the editor, and as a page of its own): a publish or a
 * restore refused because the draft was saved elsewhere since the page read it answers 409 with
 * the panel saying why. htmx drops error answers unless told to show them.
 */
document.body.addEventListener("htmx:beforeSwap", (evt) => {
  const target = evt.detail.target;
  if (target && target.id === "versions" && evt.detail.xhr.status === 409) {
    evt.detail.shouldSwap = true;
    evt.detail.isError = false;
  }
});
