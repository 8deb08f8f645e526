// Copy buttons: <button data-copy="#selector"> copies that element's text. Delegated
// from document so buttons swapped in by htmx work too; no inline handlers.
"use strict";
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  if (!source) return;
  const selectIt = () => {
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  };
  const done = (label) => {
    button.textContent = label;
    window.setTimeout(() => { button.textContent = "Copy"; }, 2000);
  };
  // The clipboard API needs a secure context (https or localhost); elsewhere select the
  // text so Ctrl+C copies it.
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(source.textContent).then(
      () => done("Copied"),
      () => { selectIt(); done("Press Ctrl+C"); },
    );
  } else {
    selectIt();
    done("Press Ctrl+C");
  }
});
