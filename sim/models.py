"""MODELLED competitors the product cannot express: a first-to-reply broadcast and a tiered broadcast. Clearly
not the product.

They run on the same generated month and the same patient behaviour (``Month.reply``, the patient's own channel
and night) as the real runs, with the same eligibility (window, practitioner, not booked, not opted out), the same
quiet hours (nothing is sent in them: a send due then waits for their end), the same lead (a vacancy opens only
``min_lead_minutes`` ahead) and every feature of ours that is not the one-offer-at-a-time rule:

* **standing acceptance**: when a vacancy opens, the first eligible patient in order whose minimum notice the
  slot's lead meets (the product's ``standing_outcome``) is booked at once, with the product's release deadline
  (``standing_release_minutes`` after booking, never later than the slot's start minus the lead: the product's
  ``release_deadline``); the patient acknowledges, releases or leaves it unread exactly as under ours, and the
  product's acknowledgement job (reminder and release of an unacknowledged booking at the product's ``ack_times``)
  applies alike (``sim.acknowledge``);
* **late replies**: an offer has no per-patient window; the slot stays open until its start minus ours' answer
  margin, and any yes before that books it (as real first-to-reply products run);
* first yes wins; a patient who says yes after the slot went is told it is taken (one message).

``broadcast``: every eligible patient is notified at once (and every newcomer who fits while it is open).
``tiered``: a few first (``tier_size``), twice as many more each time a share of the time left has passed without
a yes, and everyone once less than ``tier_all_hours`` remain ("a few patients at first, more as time runs short",
GoRendezvous as issue #41 describes it; the tier sizes and times are ours, assumptions).

Their log has the real runs' shape (``adapter.export``) plus ``standing``.
"""

from __future__ import annotations

import heapq
import itertools
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from . import acknowledge
from .adapter import PolicySpec
from .generator import Month, fits
from .windows import Window


def release_deadline(rules: PolicySpec, margin: timedelta, booked_at: datetime, starts_at: datetime) -> datetime:
    """The product's ``rules.terms.release_deadline`` on an unsaved policy with ours' lead and margin (the
    product's default ``standing_release_minutes``)."""
    from waitlist.models import WaitlistPolicy
    from waitlist.rules.terms import release_deadline as product_release_deadline

    policy = WaitlistPolicy(min_lead_minutes=rules.min_lead_minutes,
                            answer_window_margin_minutes=int(margin.total_seconds() // 60))
    return product_release_deadline(policy, booked_at=booked_at, starts_at=starts_at)


def standing_policy(standing_on: bool):
    """An unsaved product policy with ours' ``standing_acceptance``, for ``standing_books``."""
    from waitlist.models import WaitlistPolicy

    return WaitlistPolicy(standing_acceptance=standing_on)


def standing_books(policy, min_notice_minutes: int | None, starts_at: datetime, now: datetime) -> bool:
    """Whether a standing acceptance books the patient at once: the product's ``rules.terms.standing_outcome``
    (APPLIES) under ``policy`` (``standing_policy``)."""
    from waitlist.rules.terms import APPLIES, standing_outcome

    return standing_outcome(policy, min_notice_minutes, starts_at=starts_at, now=now) == APPLIES


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
        rules = rules or spec
        self.tiered = spec.modelled == "tiered"
        self.tier_size = int(spec.extra.get("tier_size", 3))
        self.tier_all = timedelta(hours=float(spec.extra.get("tier_all_hours", 3)))
        self.margin = Window(rules, month.params, quiet_hours=True).margin
        self.lead = timedelta(minutes=rules.min_lead_minutes)
        self.rules = rules
        self.standing_on = spec.standing_acceptance
        self.standing_policy = standing_policy(spec.standing_acceptance)
        self.release_unacknowledged = spec.release_unacknowledged
        self.queue: list = []
        self.seq = itertools.count()
        self.booked: dict[str, datetime] = {}
        self.vacancies: dict[str, dict] = {}
        self.asked: dict[str, set] = {}
        self.barred: dict[str, set] = {}
        self.offers: list[dict] = []
        self.messages: list[dict] = []
        self.standing: list[dict] = []
        self.replies_late = 0

    def at(self, when, kind, *args):
        heapq.heappush(self.queue, (when, next(self.seq), kind, args))

    def run(self) -> dict:
        for b in self.month.cancellations:
            if b.starts_at - b.cancel_at >= self.lead:
                self.at(b.cancel_at, "open", b)
        for e in self.month.entries:
            if e.arrives_at > self.month.start:
                self.at(e.arrives_at, "arrive", e)
        while self.queue:
            when, _, kind, args = heapq.heappop(self.queue)
            getattr(self, f"_on_{kind}")(when, *args)
        vacancies = [{"key": k, "opened_at": v["opened_at"], "starts_at": v["starts_at"], "filled_at": v["filled_at"],
                      "status": "FILLED" if v["filled_at"] else "CLOSED", "exhausted": v["exhausted"]}
                     for k, v in self.vacancies.items()]
        return {"vacancies": vacancies, "offers": self.offers,
                "messages": [m for m in self.messages if m["at"] < self.month.end], "standing": self.standing}

    def _close(self, v: dict) -> datetime:
        return v["starts_at"] - self.margin

    def _candidates(self, key: str, now: datetime) -> list:
        b = self.vacancies[key]["booking"]
        ends = b.starts_at + timedelta(minutes=self.month.params.slot_minutes)
        out = [e for e in self.month.entries
               if e.arrives_at <= now and not (e.opt_out_at is not None and e.opt_out_at <= now)
               and e.key not in self.booked and e.key not in self.asked[key] and e.key not in self.barred[key]
               and fits(e, b.practitioner, b.starts_at, ends, self.month.params.timezone)]
        return sorted(out, key=lambda e: (-e.band, e.practitioner is None, e.waiting_since, e.key))

    def _on_open(self, now, booking):
        self.vacancies[booking.key] = {"booking": booking, "opened_at": now, "starts_at": booking.starts_at,
                                       "filled_at": None, "exhausted": False, "tier": 0}
        self.asked[booking.key] = set()
        self.barred[booking.key] = set()
        self._on_send(now, booking.key)

    def _standing(self, now, key) -> bool:
        """Book the first eligible patient in order whose standing notice the lead meets (ours' feature)."""
        if not self.standing_on:
            return False
        v = self.vacancies[key]
        for e in self._candidates(key, now):
            if not standing_books(self.standing_policy, self.month.standing_notice(e.key), v["starts_at"], now):
                continue
            release_until = release_deadline(self.rules, self.margin, now, v["starts_at"])
            offer = {"vacancy": key, "entry": e.key, "at": now, "notified_at": now, "status": "ACCEPTED",
                     "closed_at": now, "booked": True, "concurrent": True, "standing": True}
            self.offers.append(offer)
            self._book(now, key, e.key)
            sent = next_send_time(now, self.month)
            self.messages.append({"entry": e.key, "at": sent, "kind": "BOOKING"})
            fate = acknowledge.outcome(self.month, e.key, v["booking"], now, sent, release_until,
                                       self.release_unacknowledged)
            record = {"entry": e.key, "vacancy": key, "case": fate.case, "released_at": None,
                      "acknowledged_at": fate.acknowledged_at, "offer": offer}
            self.standing.append(record)
            if fate.reminder_at is not None:
                self.messages.append({"entry": e.key, "at": fate.reminder_at, "kind": "REMINDER"})
            if fate.release_at is not None:
                self.at(fate.release_at, "release", record)
            return True
        return False

    def _book(self, now, key, entry_key):
        v = self.vacancies[key]
        v["filled_at"] = now
        self.booked[entry_key] = now
        for other in self.offers:  # the others' offers of this slot end now ("taken" if they say yes later)
            if other["vacancy"] == key and other["entry"] != entry_key and other["closed_at"] is None:
                other.update(status="WITHDRAWN", closed_at=now)

    def _on_release(self, now, record):
        """The patient (or, unacknowledged, the policy) releases the booking: the slot reopens and is broadcast."""
        key = record["vacancy"]
        v = self.vacancies[key]
        record["released_at"] = now
        record["offer"].update(status="WITHDRAWN", booked=False)
        del self.booked[record["entry"]]
        self.barred[key].add(record["entry"])
        v["filled_at"] = None
        for o in self.offers:  # everyone asked before may still say yes (their offers are open again)
            if o["vacancy"] == key and o["status"] == "WITHDRAWN" and not o.get("standing"):
                o.update(status="EXPIRED", closed_at=None)
        self._on_send(now, key)

    def _on_send(self, now, key):
        v = self.vacancies[key]
        if v["filled_at"] is not None or now >= self._close(v):
            return
        send = next_send_time(now, self.month)
        if send != now:
            self.at(send, "send", key)
            return
        if self._standing(now, key):
            return
        batch = self._candidates(key, now)
        if self.tiered and self._close(v) - now > self.tier_all:
            size = self.tier_size * (2 ** v["tier"])
            batch = batch[:size]
            v["tier"] += 1
            # The next tier when a third of the time left has passed (at least 15 minutes), or everyone at the end.
            nxt = max(now + timedelta(minutes=15), now + (self._close(v) - now) / 3)
            self.at(min(nxt, self._close(v) - self.tier_all), "send", key)
        if not batch and not any(o["vacancy"] == key and o["closed_at"] is None for o in self.offers):
            v["exhausted"] = not self.tiered or self._close(v) - now <= self.tier_all
        for e in batch:
            self._offer(now, key, e)

    def _offer(self, now, key, e):
        self.asked[key].add(e.key)
        offer = {"vacancy": key, "entry": e.key, "at": now, "notified_at": now, "status": "EXPIRED",
                 "closed_at": None, "booked": False, "concurrent": True}
        self.offers.append(offer)
        self.messages.append({"entry": e.key, "at": now, "kind": "OFFER"})
        reply = self.month.reply(e.key, self.vacancies[key]["booking"])
        if reply.kind != "NONE":
            self.at(self.month.answer_at(now, reply), "reply", offer, reply.kind)

    def _on_arrive(self, now, entry):
        """A newcomer who fits an open, broadcast vacancy is asked too (the tiered one asks them with its next
        tier)."""
        if self.tiered:
            return
        for key, v in self.vacancies.items():
            if v["filled_at"] is None and now < self._close(v):
                self.at(now, "send", key)

    def _on_reply(self, now, offer, kind):
        v = self.vacancies[offer["vacancy"]]
        close = self._close(v)
        if now >= close:  # the slot closed to offers before the answer came
            self.replies_late += 1
            if offer["closed_at"] is None:
                offer.update(closed_at=close)
            return
        if kind == "DECLINE":
            if offer["closed_at"] is None:
                offer.update(status="DECLINED", closed_at=now)
            return
        if offer["entry"] in self.booked or v["filled_at"] is not None:
            self.replies_late += 1
            if offer["entry"] not in self.booked:
                self.messages.append({"entry": offer["entry"], "at": next_send_time(now, self.month),
                                      "kind": "SLOT_GONE"})
            if offer["closed_at"] is None:
                offer.update(closed_at=now)
            return
        offer.update(status="ACCEPTED", booked=True, closed_at=now)
        self._book(now, offer["vacancy"], offer["entry"])


def run_modelled(month: Month, spec: PolicySpec, rules: PolicySpec | None = None) -> tuple[dict, dict]:
    """The modelled policy's log and counters; ``rules`` (default: the spec itself) names the policy whose
    margin, quiet hours and lead it runs under."""
    model = Modelled(month, spec, rules)
    log = model.run()
    for o in log["offers"]:
        if o["closed_at"] is None:
            o["closed_at"] = model.vacancies[o["vacancy"]]["starts_at"] - model.margin
    return log, {"replies_after_close": model.replies_late, "rules": rules_stated(model)}


def rules_stated(model: Modelled) -> dict:
    """The rules the modelled run really ran under (its result file states them)."""
    return {"answer_window": "open until the slot's start minus the margin", "quiet_hours": True,
            "answer_margin_minutes": int(model.margin.total_seconds() // 60),
            "min_lead_minutes": int(model.lead.total_seconds() // 60), "weekly_offer_cap": None,
            "decline_suppression": None, "contact_cap_per_day": None, "decision_gate": "NOT_USED",
            "tiers": ({"first": model.tier_size, "growth": 2, "everyone_hours_before_close":
                       model.tier_all.total_seconds() / 3600} if model.tiered else "everyone at once"),
            "standing_acceptance": model.standing_on, "late_replies": "any yes before the close",
            "release_unacknowledged": model.release_unacknowledged}
