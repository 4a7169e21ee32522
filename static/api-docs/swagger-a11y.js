/* /api/docs/: Swagger UI renders some selects (the examples picker, the media types) with no accessible name;
 * give each one its visible neighbour's wording, as an aria-label, whenever the page renders new ones. */
(function () {
  "use strict";
  var NAMES = [
    [".examples-select-element", "Example"],
    [".content-type", "Media type"],
    [".parameter__enum select, .parameters-col_description select", "Value"],
  ];
  function label() {
    NAMES.forEach(function (pair) {
      document.querySelectorAll(pair[0]).forEach(function (select) {
        if (select.tagName === "SELECT" && !select.getAttribute("aria-label") && !select.labels.length) {
          select.setAttribute("aria-label", pair[1]);
        }
      });
    });
  }
  new MutationObserver(label).observe(document.documentElement, { childList: true, subtree: true });
  label();
})();
