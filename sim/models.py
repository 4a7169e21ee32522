"""MODELLED policies the product cannot express: broadcast and batches. Clearly not the product.

They run on the same generated month and the same patient behaviour (``Month.reply``) as the real
runs, with the same eligibility (window, practitioner, not the cancelling patient, not booked) and
the same quiet hours (a notice due in quiet hours waits for their end). What they leave out, and
say so in docs/simulation.md: decision freshness, weekly caps, per-day contact caps and the
matcher's budgets. Their log has the real runs' shape (``adapter.export``).

* ``broadcast``: every eligible patient is notified at once; the first accept before the start
  wins; everyone who accepts later gets a "slot gone" message (counted as a message).
* ``batch``: the next ``size`` candidates in our order (priority band, named practitioner first,
  waiting since) are notified together with a ``hold`` minute window; first accept wins; no
  accept within the window → the next batch.
"""

from __future__ import annotations

import heapq
import itertools
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from .adapter import PolicySpec
from .generator import Month, fits


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
    def __init__(self, month: Month, spec: PolicySpec):
        self.month, self.spec = month, spec
        self.size = int(spec.extra.get("batch_size", 0))  # 0: broadcast (everyone)
        self.queue: list = []
        self.seq = itertools.count()
        self.booked: dict[str, datetime] = {}
        self.vacancies: dict[str, dict] = {}
        self.asked: dict[str, set] = {}
        self.offers: list[dict] = []
        self.messages: list[dict] = []

    def at(self, when, kind, *args):
        heapq.heappush(self.queue, (when, next(self.seq), kind, args))

    def run(self) -> dict:
        lead = timedelta(minutes=self.spec.min_lead_minutes)
        for b in self.month.cancellations:
            if b.starts_at - b.cancel_at >= lead:
                self.at(b.cancel_at, "open", b)
        while self.queue:
            when, _, kind, args = heapq.heappop(self.queue)
            getattr(self, f"_on_{kind}")(when, *args)
        vacancies = [{"key": k, "opened_at": v["opened_at"], "starts_at": v["starts_at"], "filled_at": v["filled_at"],
                      "status": "FILLED" if v["filled_at"] else "CLOSED", "exhausted": v["exhausted"]}
                     for k, v in self.vacancies.items()]
        return {"vacancies": vacancies, "offers": self.offers, "messages": self.messages}

    def _candidates(self, key: str, now: datetime) -> list:
        b = self.vacancies[key]["booking"]
        ends = b.starts_at + timedelta(minutes=self.month.params.slot_minutes)
        out = [e for e in self.month.entries
               if e.arrives_at <= now and (e.opt_out_at is None or e.opt_out_at > now) and e.key not in self.booked
               and e.key not in self.asked[key] and fits(e, b.practitioner, b.starts_at, ends)]
        return sorted(out, key=lambda e: (-e.band, e.practitioner is None, e.waiting_since, e.key))

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
        batch = self._candidates(key, now)
        if self.size:
            batch = batch[: self.size]
        if not batch:
            v["exhausted"] = True
            return
        window_end = v["starts_at"] if not self.size else min(now + timedelta(minutes=self.spec.hold_minutes),
                                                               v["starts_at"])
        for e in batch:
            self.asked[key].add(e.key)
            offer = {"vacancy": key, "entry": e.key, "at": now, "notified_at": now, "status": "EXPIRED",
                     "closed_at": window_end, "booked": False, "concurrent": not self.size}
            self.offers.append(offer)
            self.messages.append({"entry": e.key, "at": now, "kind": "OFFER"})
            reply = self.month.reply(e.key, self.vacancies[key]["booking"])
            answer = self.month.answer_at(now, reply)
            if reply.kind != "NONE" and answer < window_end:
                self.at(answer, "reply", offer, reply.kind)
        if self.size:
            self.at(window_end, "window_end", key, len(self.offers))

    def _on_reply(self, now, offer, kind):
        v = self.vacancies[offer["vacancy"]]
        offer["closed_at"] = now
        if kind == "DECLINE":
            offer["status"] = "DECLINED"
        elif v["filled_at"] is None and offer["entry"] not in self.booked:
            offer.update(status="ACCEPTED", booked=True)
            v["filled_at"] = now
            self.booked[offer["entry"]] = now
        else:
            offer["status"] = "WITHDRAWN"  # too late: told the slot is gone
            self.messages.append({"entry": offer["entry"], "at": next_send_time(now, self.month), "kind": "SLOT_GONE"})

    def _on_window_end(self, now, key, _count):
        if self.vacancies[key]["filled_at"] is None:
            self._on_send(now, key)


def run_modelled(month: Month, spec: PolicySpec) -> tuple[dict, dict]:
    return Modelled(month, spec).run(), {}
