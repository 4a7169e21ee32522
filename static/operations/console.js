// Console behaviour that the CSP allows: no inline scripts, no eval. Loaded with defer.
(function () {
  "use strict";
  var TOAST_EVENT = "console-toast";
  var TOAST_MS = 5000;

  function region() {
    return document.getElementById("toasts");
  }

  // A toast never covers the control that raised it: if it would, the toasts move to the top.
  function keepClear(box, source) {
    if (!(source instanceof Element) || !source.isConnected) return;
    var a = box.getBoundingClientRect(), b = source.getBoundingClientRect();
    var overlap = a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    box.classList.toggle("toasts-top", overlap || (box.classList.contains("toasts-top") && b.top < a.bottom));
  }

  function showToast(message, level, source) {
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
    keepClear(box, source);
    window.setTimeout(function () { toast.remove(); }, TOAST_MS);
  }

  // Views call operations.responses.with_toast(), which sets HX-Trigger: {"console-toast": {...}}.
  document.addEventListener(TOAST_EVENT, function (event) {
    var detail = event.detail || {};
    var source = event.target instanceof Element ? event.target.querySelector("button[type=submit]") || event.target : null;
    showToast(detail.message, detail.level, source);
  });

  // Every htmx request shows progress (a bar on top, and .htmx-request on its indicator) and disables
  // the submit buttons of the form that sent it until the answer comes. Background polls stay quiet.
  var inFlight = 0;
  function isPoll(elt) {
    return (elt.getAttribute("hx-trigger") || "").indexOf("every") === 0;
  }
  function submitButtons(elt) {
    var form = elt.tagName === "FORM" ? elt : elt.closest("form");
    if (!form) return [];
    var own = Array.prototype.slice.call(form.querySelectorAll("button[type=submit], button:not([type])"));
    if (form.id) own = own.concat(Array.prototype.slice.call(document.querySelectorAll("button[form='" + form.id + "']")));
    return own;
  }
  document.addEventListener("htmx:beforeSend", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!(elt instanceof Element) || isPoll(elt)) return;
    inFlight++;
    document.documentElement.classList.add("busy");
    var buttons = submitButtons(elt).filter(function (b) { return !b.disabled; });
    buttons.forEach(function (b) { b.disabled = true; b.setAttribute("aria-busy", "true"); });
    elt._consoleDisabled = buttons;
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!(elt instanceof Element) || isPoll(elt)) return;
    inFlight = Math.max(0, inFlight - 1);
    if (!inFlight) document.documentElement.classList.remove("busy");
    (elt._consoleDisabled || []).forEach(function (b) { b.disabled = false; b.removeAttribute("aria-busy"); });
    elt._consoleDisabled = null;
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

  // Copy buttons beside truncated refs (operations/partials/ref.html).
  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element && event.target.closest("button.copy[data-copy]");
    if (!button) return;
    var text = button.getAttribute("data-copy");
    var done = function () {
      button.classList.add("copied");
      window.setTimeout(function () { button.classList.remove("copied"); }, 1200);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () { showToast("Copy failed: select the ref instead.", "error"); });
    } else {
      showToast(text, "info");
    }
  });

  // Live lists: "updated N s ago" after each successful poll, countdowns to expiry, and no poll once
  // the user loaded more pages (a refresh would drop them; reload the page to go live again).
  function markUpdated() {
    // Freshly rendered notes (page load or a swapped-in poll answer) have no data-at yet.
    var notes = document.querySelectorAll("[data-updated]:not([data-at])");
    for (var i = 0; i < notes.length; i++) notes[i].setAttribute("data-at", String(Date.now()));
  }
  // "14 min left", "2 h 5 min left", "45 s left": a duration, never something that reads like a clock time.
  function timeLeft(seconds) {
    if (seconds < 60) return seconds + " s left";
    var minutes = Math.floor(seconds / 60);
    if (minutes < 60) return minutes + " min left";
    return Math.floor(minutes / 60) + " h " + (minutes % 60) + " min left";
  }
  function tick() {
    var now = Date.now();
    var notes = document.querySelectorAll("[data-updated]");
    for (var i = 0; i < notes.length; i++) {
      var at = Number(notes[i].getAttribute("data-at") || now);
      var paused = notes[i].closest("[data-paused]");
      var formPaused = notes[i].closest("[data-live-note]") && document.documentElement.classList.contains("live-paused");
      notes[i].textContent = "updated " + Math.max(0, Math.round((now - at) / 1000)) + " s ago" +
        (paused ? " · live refresh paused (more pages loaded)" : "") +
        (formPaused ? " · paused while a form is open" : "");
    }
    var clocks = document.querySelectorAll("time[data-countdown]");
    for (var j = 0; j < clocks.length; j++) {
      var left = Math.round((Date.parse(clocks[j].getAttribute("datetime")) - now) / 1000);
      if (isNaN(left)) continue;
      if (!clocks[j].hasAttribute("title")) clocks[j].setAttribute("title", clocks[j].textContent);
      clocks[j].textContent = left <= 0 ? "expired" : timeLeft(left);
      clocks[j].classList.toggle("soon", left > 0 && left < 120);
    }
  }
  document.addEventListener("DOMContentLoaded", function () { markUpdated(); tick(); });
  window.setInterval(tick, 1000);
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!(elt instanceof Element)) return;
    if (elt.hasAttribute("data-load-more")) {
      var results = elt.closest("[hx-trigger^='every']");
      if (results) results.setAttribute("data-paused", "");
    } else if (elt.hasAttribute("data-paused")) {
      event.preventDefault();
    }
  });
  document.addEventListener("htmx:afterSettle", function () { markUpdated(); tick(); });
  // Ticking a row for a bulk command pauses the live refresh (it would clear the ticks) until the
  // command ran: its answer fires waitlist-changed, which resumes and refreshes the list.
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!(box instanceof HTMLInputElement) || !box.hasAttribute("form")) return;
    var region = box.closest("[hx-trigger^='every']");
    if (region) region.setAttribute("data-paused", "");
  });
  // The desk's availability: ticking a day or part of the day unticks "Any time", ticking "Any time" clears
  // them (the form refuses both at once; without script the refusal says which to untick).
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!(box instanceof HTMLInputElement) || box.type !== "checkbox") return;
    var group = box.closest("fieldset.availability");
    if (!group || !box.checked) return;
    var boxes = group.querySelectorAll("input[type=checkbox]");
    for (var i = 0; i < boxes.length; i++) {
      var other = boxes[i];
      if (other === box) continue;
      if (box.name.slice(-8) === "any_time" || other.name.slice(-8) === "any_time") other.checked = false;
    }
  });
  document.addEventListener("waitlist-changed", function () {
    var paused = document.querySelectorAll("[data-paused]");
    for (var i = 0; i < paused.length; i++) paused[i].removeAttribute("data-paused");
  }, true); // capture: before htmx's "from:body" listener starts the refresh


  // Live regions ([data-live], operations/live.py): every poll sends the ETag of what is shown and a 304
  // means "unchanged": no swap, so no flicker, and focus and scroll stay. A timed poll waits while the user
  // fills in a form (focus inside one, a typed-in one, or an open disclosure holding one); a change the user
  // made themselves (waitlist-changed) refreshes at once.
  function formOpen() {
    var active = document.activeElement;
    var main = document.getElementById("main");
    if (!main) return false;
    if (active && main.contains(active) && active.closest("form")) return true;
    return !!main.querySelector("form[data-dirty], details[open] form");
  }
  function setLivePaused(paused) {
    document.documentElement.classList.toggle("live-paused", paused);
  }
  document.addEventListener("input", function (event) {
    var form = event.target instanceof Element && event.target.closest("#main form");
    if (form && !form.classList.contains("filters")) form.setAttribute("data-dirty", "");
  });
  document.addEventListener("htmx:configRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (elt instanceof Element && elt.hasAttribute("data-live") && elt.getAttribute("data-etag")) {
      event.detail.headers["If-None-Match"] = elt.getAttribute("data-etag");
    }
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!(elt instanceof Element) || !elt.hasAttribute("data-live")) return;
    var timed = !(event.detail.requestConfig && event.detail.requestConfig.triggeringEvent);
    var paused = timed && formOpen();
    setLivePaused(paused);
    if (paused) event.preventDefault();
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var elt = event.detail && event.detail.elt;
    var xhr = event.detail && event.detail.xhr;
    if (!(elt instanceof Element) || !elt.hasAttribute("data-live") || !xhr) return;
    var etag = xhr.getResponseHeader("ETag");
    if (xhr.status === 304 || (etag && etag === elt.getAttribute("data-etag"))) event.detail.shouldSwap = false;
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    var xhr = event.detail && event.detail.xhr;
    if (!(elt instanceof Element) || !elt.hasAttribute("data-live") || !xhr) return;
    if (xhr.status !== 200 && xhr.status !== 304) return;
    var etag = xhr.getResponseHeader("ETag");
    if (etag) elt.setAttribute("data-etag", etag);
    var notes = document.querySelectorAll("[data-live-note] [data-updated]");
    for (var i = 0; i < notes.length; i++) notes[i].setAttribute("data-at", String(Date.now()));
    var count = xhr.getResponseHeader("X-Console-Attention");
    if (count !== null && elt.hasAttribute("data-attention-title")) {
      var base = document.title.replace(/^\([^)]*\) /, "");
      document.title = (count === "0" ? "" : "(" + count + ") ") + base;
    }
    tick();
  });

  // A detail panel that loaded out of sight (stacked layouts, phones) scrolls into view.
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (!(target instanceof Element) || !target.matches("#wl-detail, #reeval-detail")) return;
    var box = target.getBoundingClientRect();
    if (box.top > window.innerHeight || box.bottom < 0) target.scrollIntoView({ behavior: "smooth", block: "start" });
  });

  // "/" focuses the search box (as in Sidekiq/GitHub), unless the user is typing somewhere.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    var active = document.activeElement;
    if (active && (active.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName))) return;
    var search = document.getElementById("console-search");
    if (!search) return;
    event.preventDefault();
    search.focus();
  });

  // Close the clinic switcher when clicking elsewhere.
  document.addEventListener("click", function (event) {
    var open = document.querySelectorAll("details.switcher[open]");
    for (var i = 0; i < open.length; i++) {
      if (!open[i].contains(event.target)) open[i].removeAttribute("open");
    }
  });
})();
