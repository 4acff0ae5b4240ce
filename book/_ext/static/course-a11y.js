/* Accessibility fixes for the course website (book/_ext/alt_text.py adds this file to every
   page). The ipywidgets sliders that the pages render from stored widget state give their
   handles (role="slider") no name, so a screen reader announces only "slider, 1.00". Name each
   handle after its widget's description, once the widgets have been drawn. */
(function () {
  "use strict";
  function nameSliders(root) {
    var handles = root.querySelectorAll('.noUi-handle[role="slider"]:not([aria-label])');
    Array.prototype.forEach.call(handles, function (handle) {
      var widget = handle.closest(".widget-slider, .jupyter-widgets");
      var label = widget ? widget.querySelector(".widget-label") : null;
      var text = label ? label.textContent.trim() : "";
      handle.setAttribute("aria-label", text || "slider");
    });
  }
  function start() {
    nameSliders(document);
    if (!document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]')) {
      return;  // no widgets on this page
    }
    new MutationObserver(function () { nameSliders(document); })
      .observe(document.body, {childList: true, subtree: true});
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
