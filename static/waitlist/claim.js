/* The claim page's live countdown (progressive enhancement: without this file the server's "14 min left"
 * stands as it was rendered, and the answer is checked on the server anyway).
 *
 * It counts from the seconds left when the page was made (data-seconds), not from the phone's clock, and
 * changes the visible text only when the whole minutes change. Screen readers hear it through one polite
 * status region, at most once a minute and only at milestones (60, 30, 15, 10, 5, 2 and 1 minutes left,
 * under a minute, and the end), so the page is not chatty. The phrases come from the page (data-t-*),
 * already in the patient's language. CSP: a file under 'self', no inline script.
 */
(function () {
  "use strict";
  var el = document.querySelector("[data-countdown]");
  if (!el) return;
  var status = document.querySelector("[data-countdown-status]");
  var started = Date.now();
  var total = parseInt(el.getAttribute("data-seconds"), 10) * 1000;
  if (isNaN(total)) return;
  var MILESTONES = [60, 30, 15, 10, 5, 2, 1];
  var lastSpoken = null;
  var lastSpokenAt = -Infinity;
  var pending = null;

  function phrase(minutes, left) {
    if (left <= 0) return el.getAttribute("data-t-end");
    if (minutes < 1) return el.getAttribute("data-t-lt");
    var h = Math.floor(minutes / 60), m = minutes % 60;
    var template = h ? el.getAttribute("data-t-hm") : el.getAttribute("data-t-m");
    return template.replace("{h}", String(h)).replace("{m}", String(m));
  }

  function speak(text, minutes, left) {
    if (!status) return;
    var now = Date.now();
    var milestone = left <= 0 || minutes < 1 || MILESTONES.indexOf(minutes) !== -1;
    if (!milestone || text === lastSpoken) return;
    window.clearTimeout(pending);
    var wait = 60000 - (now - lastSpokenAt);
    if (wait > 0) {  // too soon after the last one: say it when a minute has passed, if still current
      pending = window.setTimeout(function () { speak(el.textContent, minutes, left); }, wait + 10);
      return;
    }
    status.textContent = text;
    lastSpoken = text;
    lastSpokenAt = now;
  }

  function tick() {
    var left = total - (Date.now() - started);
    var minutes = Math.floor(Math.max(left, 0) / 60000);
    var text = phrase(minutes, left);
    if (el.textContent !== text) {
      el.textContent = text;
      if (left <= 0) el.closest("dd").classList.add("ended");
      speak(text, minutes, left);
    }
    if (left > 0) {
      // Wake just after the next whole minute (or the end) is crossed.
      var next = left % 60000 || 60000;
      window.setTimeout(tick, Math.min(next + 50, left + 50));
    }
  }

  lastSpokenAt = Date.now();  // the page's own text was just read; the first announcement comes later
  lastSpoken = el.textContent;
  tick();
})();
