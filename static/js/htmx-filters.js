// htmx trigger filters without eval: the Content-Security-Policy allows scripts only
// from this site, so filters such as `every 5s [document.visibilityState === 'visible']`
// (which htmx evaluates as JavaScript text) are written as data attributes instead and
// applied here, before htmx issues the request.
//   data-poll-visible: skip a polling request while the page is hidden.
//   data-change-selects-only: a "change" event triggers only from a <select> (text
//   inputs trigger on "input" with a delay).
document.addEventListener("htmx:confirm", function (event) {
  var element = event.detail.elt;
  var trigger = event.detail.triggeringEvent;
  if (element.hasAttribute("data-poll-visible") && document.visibilityState !== "visible") {
    event.preventDefault();
    return;
  }
  if (
    element.hasAttribute("data-change-selects-only") &&
    trigger && trigger.type === "change" &&
    trigger.target && trigger.target.tagName !== "SELECT"
  ) {
    event.preventDefault();
  }
});
