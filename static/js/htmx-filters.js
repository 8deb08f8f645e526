// htmx trigger filters without eval: the Content-Security-Policy allows scripts only
// from this site, so filters such as `every 5s [document.visibilityState === 'visible']`
// (which htmx evaluates as JavaScript text) are written as data attributes instead and
// applied here, before htmx issues the request.
//   data-poll-visible: skip a polling request while the page is hidden, or while the
//     user is filling in a form inside the polled element (a field has the focus or was
//     changed), so a refresh never takes away what they typed.
//   data-poll-current-url: poll the address bar's URL (which hx-push-url keeps current
//     with the filters, sort and page), and drop an answer that arrives after the
//     address changed (a newer filter request is on its way).
//   data-change-selects-only: a "change" event triggers only from a <select> (text
//     inputs trigger on "input" with a delay).
"use strict";

function isEditing(element) {
  var active = document.activeElement;
  if (active && active !== element && element.contains(active) &&
      /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) {
    return true;
  }
  var fields = element.querySelectorAll("input, select, textarea");
  for (var i = 0; i < fields.length; i++) {
    var field = fields[i];
    if (field.type === "hidden") continue;
    if (field.type === "checkbox" || field.type === "radio") {
      if (field.checked !== field.defaultChecked) return true;
    } else if (field.tagName === "SELECT") {
      // With no option marked selected, a single select starts on its first option.
      var marked = false;
      for (var k = 0; k < field.options.length; k++) {
        if (field.options[k].defaultSelected) marked = true;
      }
      for (var j = 0; j < field.options.length; j++) {
        var initial = marked ? field.options[j].defaultSelected : !field.multiple && j === 0;
        if (field.options[j].selected !== initial) return true;
      }
    } else if (field.value !== field.defaultValue) {
      return true;
    }
  }
  return false;
}

function currentUrl() {
  return window.location.pathname + window.location.search;
}

document.addEventListener("htmx:confirm", function (event) {
  var element = event.detail.elt;
  var trigger = event.detail.triggeringEvent;
  // A poll has no triggering event; an event such as "policy-saved" always fetches.
  if (element.hasAttribute("data-poll-visible") && !trigger &&
      (document.visibilityState !== "visible" || isEditing(element))) {
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

document.addEventListener("htmx:configRequest", function (event) {
  if (event.detail.elt.hasAttribute("data-poll-current-url")) {
    event.detail.path = currentUrl();
  }
});

document.addEventListener("htmx:beforeSwap", function (event) {
  // detail.elt is the swap's target here; the poller is the request's own element.
  var config = event.detail.requestConfig;
  if (config && config.elt && config.elt.hasAttribute("data-poll-current-url") &&
      config.path !== currentUrl()) {
    event.detail.shouldSwap = false;
  }
});
