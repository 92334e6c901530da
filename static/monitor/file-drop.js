/*
 * file-drop.js: the run form's file fields (`data-file-drop`). Files dropped onto a field are
 * given to it as if chosen; each field lists the files it holds with their sizes, and says at
 * once when one is over the field's `data-max-bytes` or there are more than `data-max-files`
 * (the server checks them all the same). Names are shown as text, never as markup.
 */
const sizeOf = (bytes) => {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
};

const describe = (input, list) => {
  const maxBytes = Number(input.dataset.maxBytes || 0);
  const maxFiles = Number(input.dataset.maxFiles || 0);
  list.replaceChildren();
  let problem = "";
  for (const file of input.files) {
    const item = document.createElement("li");
    item.textContent = `${file.name} (${sizeOf(file.size)})`;
    if (maxBytes && file.size > maxBytes) {
      item.classList.add("error");
      problem = `${file.name} is over ${sizeOf(maxBytes)}, the most this input takes`;
    }
    list.append(item);
  }
  if (maxFiles && input.files.length > maxFiles) {
    problem = `at most ${maxFiles} files`;
  }
  input.setCustomValidity(problem);
  list.dataset.problem = problem;
};

for (const input of document.querySelectorAll("input[type=file][data-file-drop]")) {
  const zone = input.closest(".field") || input;
  zone.classList.add("file-drop");
  const list = document.createElement("ul");
  list.className = "file-list muted";
  list.setAttribute("aria-live", "polite");
  input.after(list);
  input.addEventListener("change", () => describe(input, list));
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("dragging"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("dragging");
    const dropped = new DataTransfer();
    const files = [...event.dataTransfer.files];
    for (const file of input.multiple ? files : files.slice(0, 1)) dropped.items.add(file);
    input.files = dropped.files;
    describe(input, list);
  });
}
