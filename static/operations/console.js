// Console behaviour that the CSP allows: no inline scripts, no eval. Loaded with defer.
(function () {
  "use strict";
  var TOAST_EVENT = "console-toast";
  var TOAST_MS = 5000;

  function region() {
    return document.getElementById("toasts");
  }

  function showToast(message, level) {
    var box = region();
    if (!box || !message) return;
    var toast = document.createElement("div");
    toast.className = "toast toast-" + (level || "info");
    toast.setAttribute("data-testid", "toast");
    toast.textContent = message; // textContent: server text is never parsed as HTML
    var close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "×";
    close.addEventListener("click", function () { toast.remove(); });
    toast.appendChild(close);
    box.appendChild(toast);
    window.setTimeout(function () { toast.remove(); }, TOAST_MS);
  }

  // Views call operations.responses.with_toast(), which sets HX-Trigger: {"console-toast": {...}}.
  document.addEventListener(TOAST_EVENT, function (event) {
    var detail = event.detail || {};
    showToast(detail.message, detail.level);
  });

  // A failed request whose response carried no toast still tells the user something happened.
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail && event.detail.xhr;
    if (xhr && !xhr.getResponseHeader("HX-Trigger")) {
      showToast("The request failed (" + xhr.status + "). Reload the page and try again.", "error");
    }
  });
  document.addEventListener("htmx:sendError", function () {
    showToast("The server could not be reached.", "error");
  });

  // A click anywhere on a queue row opens its detail panel: it follows the row's own link (htmx).
  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!(target instanceof Element) || target.closest("a, button, input, select, textarea, label")) return;
    var row = target.closest("tr[data-detail-row]");
    var link = row && row.querySelector("a[hx-get]");
    if (link) link.click();
  });

  // Close the clinic switcher when clicking elsewhere.
  document.addEventListener("click", function (event) {
    var open = document.querySelectorAll("details.switcher[open]");
    for (var i = 0; i < open.length; i++) {
      if (!open[i].contains(event.target)) open[i].removeAttribute("open");
    }
  });
})();
