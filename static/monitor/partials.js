/*
 * partials.js: fetch a server-rendered piece of a page and swap it in with htmx.
 *
 * Not htmx.ajax: without a source element every such call is queued on <body>, where htmx keeps
 * only the last waiting request and drops the others (a card refresh lost to a header refresh).
 */
export async function loadPartial(url, target, swapStyle) {
  const response = await fetch(url, { headers: { "HX-Request": "true" }, credentials: "same-origin" });
  // A redirect means the session ended (the login page): leave the page as it is.
  if (!response.ok || response.redirected) return false;
  const html = await response.text();
  const element = typeof target === "string" ? document.querySelector(target) : target;
  if (!element || !element.isConnected) return false;
  window.htmx.swap(element, html, { swapStyle });
  return true;
}
