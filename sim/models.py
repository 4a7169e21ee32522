"""MODELLED policies the product cannot express: broadcast and batches. Clearly not the product.

They run on the same generated month and the same patient behaviour (``Month.reply``) as the real
runs, with the same eligibility (window, practitioner, not the cancelling patient, not booked), the
same quiet hours (a notice due in quiet hours waits for their end), one open offer per patient (a
patient answering one offer is not asked about another until it closes) and the same answer window
as ours (``sim.windows``: the product's ``answer_deadline`` on ours' rule): no policy wins by giving
patients longer to answer. What they leave out, and their result files say so (``rules``): decision
freshness, weekly caps, decline suppression, per-day contact caps and the matcher's budgets. Their
log has the real runs' shape (``adapter.export``).

* ``broadcast``: every eligible, free patient is notified at once; the first accept inside its window
  wins; the others' offers end then, and whoever accepts later gets a "slot gone" message (counted as
  a message). A window that ends unfilled asks the eligible patients not asked yet.
* ``batch``: the next ``size`` candidates in our order (priority band, named practitioner first,
  waiting since) are notified together; first accept inside the window wins; no accept within the
  window → the next batch.
"""

from __future__ import annotations

import heapq
import itertools
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from .adapter import PolicySpec
from .generator import Month, fits
from .windows import Window


def next_send_time(at: datetime, month: Month) -> datetime:
    """``at``, or the end of quiet hours if ``at`` falls inside them."""
    from .metrics import in_quiet_hours

    if not in_quiet_hours(at, month):
        return at
    zone = ZoneInfo(month.params.timezone)
    local = at.astimezone(zone)
    end_h, end_m = (int(x) for x in month.params.quiet_end.split(":"))
    candidate = local.replace(hour=end_h, minute=end_m, second=0, microsecond=0)
    if candidate <= local:
        candidate += timedelta(days=1)
    return candidate


class Modelled:
    def __init__(self, month: Month, spec: PolicySpec, rules: PolicySpec | None = None):
        self.month, self.spec = month, spec
        self.size = int(spec.extra.get("batch_size", 0))  # 0: broadcast (everyone)
        # The answer window, quiet hours and lead of ``rules`` (ours), so no policy gets a longer window.
        self.window = Window(rules or spec, month.params, quiet_hours=True)
        self.lead = timedelta(minutes=(rules or spec).min_lead_minutes)
        self.queue: list = []
        self.seq = itertools.count()
        self.booked: dict[str, datetime] = {}
        self.vacancies: dict[str, dict] = {}
        self.asked: dict[str, set] = {}
        self.offers: list[dict] = []
        self.messages: list[dict] = []
        self.open_offer: dict[str, dict] = {}  # entry → its one open offer (one open offer per patient)
        self.replies_late = 0

    def at(self, when, kind, *args):
        heapq.heappush(self.queue, (when, next(self.seq), kind, args))

    def run(self) -> dict:
        for b in self.month.cancellations:
            if b.starts_at - b.cancel_at >= self.lead:
                self.at(b.cancel_at, "open", b)
        while self.queue:
            when, _, kind, args = heapq.heappop(self.queue)
            getattr(self, f"_on_{kind}")(when, *args)
        vacancies = [{"key": k, "opened_at": v["opened_at"], "starts_at": v["starts_at"], "filled_at": v["filled_at"],
                      "status": "FILLED" if v["filled_at"] else "CLOSED", "exhausted": v["exhausted"]}
                     for k, v in self.vacancies.items()]
        return {"vacancies": vacancies, "offers": self.offers, "messages": self.messages}

    def _busy(self, entry_key: str, now: datetime) -> datetime | None:
        """When the entry's open offer closes, if it has one at ``now``."""
        offer = self.open_offer.get(entry_key)
        if offer is None or offer["closed_at"] <= now:
            return None
        return offer["closed_at"]

    def _candidates(self, key: str, now: datetime) -> tuple[list, datetime | None]:
        """Eligible candidates in our order, and the earliest time a busy one (open offer) is free again."""
        b = self.vacancies[key]["booking"]
        ends = b.starts_at + timedelta(minutes=self.month.params.slot_minutes)
        out, free_at = [], None
        for e in self.month.entries:
            if (e.arrives_at > now or (e.opt_out_at is not None and e.opt_out_at <= now) or e.key in self.booked
                    or e.key in self.asked[key] or not fits(e, b.practitioner, b.starts_at, ends)):
                continue
            busy = self._busy(e.key, now)
            if busy is not None:
                free_at = busy if free_at is None else min(free_at, busy)
                continue
            out.append(e)
        return sorted(out, key=lambda e: (-e.band, e.practitioner is None, e.waiting_since, e.key)), free_at

    def _on_open(self, now, booking):
        self.vacancies[booking.key] = {"booking": booking, "opened_at": now, "starts_at": booking.starts_at,
                                       "filled_at": None, "exhausted": False}
        self.asked[booking.key] = set()
        self._on_send(now, booking.key)

    def _on_send(self, now, key):
        v = self.vacancies[key]
        if v["filled_at"] is not None or now >= v["starts_at"]:
            return
        send = next_send_time(now, self.month)
        if send != now:
            self.at(send, "send", key)
            return
        batch, free_at = self._candidates(key, now)
        if self.size:
            batch = batch[: self.size]
        if not batch:
            if free_at is not None and free_at < v["starts_at"]:
                self.at(free_at, "send", key)  # a candidate is answering another offer: ask when it closes
            else:
                v["exhausted"] = True
            return
        window_end = self.window.deadline(now, v["starts_at"])
        for e in batch:
            self.asked[key].add(e.key)
            offer = {"vacancy": key, "entry": e.key, "at": now, "notified_at": now, "status": "EXPIRED",
                     "closed_at": window_end, "booked": False, "concurrent": not self.size}
            self.offers.append(offer)
            self.open_offer[e.key] = offer
            self.messages.append({"entry": e.key, "at": now, "kind": "OFFER"})
            reply = self.month.reply(e.key, self.vacancies[key]["booking"])
            if reply.kind != "NONE":
                self.at(self.month.answer_at(now, reply), "reply", offer, reply.kind)
        self.at(window_end, "window_end", key)

    def _on_reply(self, now, offer, kind):
        v = self.vacancies[offer["vacancy"]]
        if offer["closed_at"] <= now:
            self.replies_late += 1  # the window ended (or the slot was filled) before the answer came
            if kind == "ACCEPT" and offer["status"] == "WITHDRAWN":
                self.messages.append({"entry": offer["entry"], "at": next_send_time(now, self.month),
                                      "kind": "SLOT_GONE"})
            return
        offer["closed_at"] = now
        if kind == "DECLINE":
            offer["status"] = "DECLINED"
            return
        offer.update(status="ACCEPTED", booked=True)
        v["filled_at"] = now
        self.booked[offer["entry"]] = now
        for other in self.offers:  # the others' offers of this slot end now ("slot gone" if they accept)
            if other["vacancy"] == offer["vacancy"] and other is not offer and other["closed_at"] > now:
                other.update(status="WITHDRAWN", closed_at=now)

    def _on_window_end(self, now, key):
        if self.vacancies[key]["filled_at"] is None:
            self._on_send(now, key)


def run_modelled(month: Month, spec: PolicySpec, rules: PolicySpec | None = None) -> tuple[dict, dict]:
    """The modelled policy's log and counters; ``rules`` (default: the spec itself) names the policy whose
    answer window, quiet hours and lead it runs under."""
    model = Modelled(month, spec, rules)
    log = model.run()
    return log, {"replies_after_close": model.replies_late, "rules": rules_stated(model)}


def rules_stated(model: Modelled) -> dict:
    """The rules the modelled run really ran under (its result file states them)."""
    return {"answer_window": model.window.values, "quiet_hours": True, "one_open_offer_per_patient": True,
            "min_lead_minutes": int(model.lead.total_seconds() // 60), "weekly_offer_cap": None,
            "decline_suppression": None, "contact_cap_per_day": None, "decision_gate": "NOT_USED",
            "batch_size": model.size or "all eligible", "standing_acceptance": False,
            # Ours' short window for a patient whose recent offers went unanswered is not modelled: every patient
            # gets the whole window (in a broadcast a silent patient holds nobody back anyway).
            "answer_window_unanswered_minutes": None}
