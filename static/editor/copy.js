/*
 * copy.js: a button with `data-copy="ID"` copies the text of the element ID (the Triggers tab's
 * webhook addresses and curl examples). Delegated, so content loaded later by htmx has it too.
 */
document.addEventListener("click", (evt) => {
  const button = evt.target.closest("[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = "value" in source ? source.value : source.textContent;
  navigator.clipboard.writeText(text).then(
    () => { button.textContent = "Copied"; },
    () => { button.textContent = "Select and copy by hand"; },
  );
});
