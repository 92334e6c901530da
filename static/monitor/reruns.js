/*
 * reruns.js: the monitor's Resume and "Fork from here" forms. A refused request (400, 409)
 * answers with why, to show in the form; htmx drops error answers unless told to show them.
 * A request that is done answers with `HX-Redirect` to the run's monitor.
 */
document.body.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  if (target && target.classList && target.classList.contains("rerun-errors")) {
    if ([400, 409].includes(event.detail.xhr.status)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  }
});
