"""Replays a generated month through the real waitlist services with a controlled clock.

A discrete-event loop: cancellations, waitlist arrivals and opt-outs from the month; offer expiries
at each offer's ``expires_at`` as the product stored it (read back after the notice's delivery moved
it: the engine computes no window); the outbox worker right after each offer and again when a deferred
notice falls due; each patient's reply at (notice read + their reply delay); reconcile daily. The
process clock travels to each event (time-machine, no ticking), and every command also gets
``now=``. Nothing sleeps.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta

import time_machine

from . import adapter
from .adapter import PolicySpec, World
from .generator import Month, fits
from .metrics import in_quiet_hours
from .models import next_send_time

# The product reconciles every minute. Its step that changes outcomes is re-dispatching open vacancies
# that gained a candidate; a candidate can appear only when an entry arrives, an offer of theirs closes,
# or at a time the product's rows name (the entry's ``suppressed_until``, a week after each of its offers
# under a weekly cap). The engine wakes the entry exactly then ("wake": the open vacancies without an
# offer that the entry fits and that the product's ``matcher.ineligibility`` lets it be offered; any
# other would answer NO_CANDIDATE again) and runs the whole reconcile_run once a day. Same outcomes,
# without thousands of idle NO_CANDIDATE passes, and without a copy of the product's rules.
RECONCILE_EVERY = timedelta(hours=24)
# Events after which offers can close (→ cascade) or be made.
CHANGES_OFFERS = {"cancel", "expire", "reply", "opt_out", "reconcile", "arrive", "wake", "redispatch", "review",
                  "release", "ack_job"}
# Events after which an offer can have closed (the others only dispatch: they make offers, never close one).
CLOSES_OFFERS = {"expire", "reply", "opt_out", "reconcile", "review"}
ACTIVE = ("OFFERED", "ACCEPTED")


class Replay:
    def __init__(self, month: Month, spec: PolicySpec, run_label: str):
        self.month, self.spec, self.run_label = month, spec, run_label
        self.queue: list = []
        self.seq = itertools.count()
        self.offers: dict[str, dict] = {}  # offer ref → {id, vacancy, entry, vacancy_key, expires}
        self.active: set[str] = set()
        self.asked: dict[str, set[str]] = defaultdict(set)  # vacancy ref → entry refs it was offered to
        self.booked: set[str] = set()  # entry refs booked through an accepted offer
        self.closing = False  # the current event can have closed offers (read their states)
        # Since the last read: a command made an offer (a dispatch answered OFFERED; staff review and reconcile
        # can), or made a vacancy wait (WAITING, STAFF_REVIEW; review and reconcile again). Offers come only
        # from dispatch (waitlist/dispatch/loop.py), so the offer and waiting-vacancy reads run only then.
        self.offered = False
        self.waits = False
        self.awaiting_notice: set[str] = set()
        self.delivered = False  # the outbox worker ran since the awaited notices were last read
        self.changes = 0  # events and dispatches so far that may have changed which vacancies are open
        self.open_read: tuple = (None, [])
        self.last_offer_id = 0
        self.scheduled: set[tuple[str, datetime]] = set()
        self.replies_late = 0
        self.late_accepts: Counter = Counter()  # late accept outcomes (BOOKED or the product's refusal code)
        self.cost: dict[str, list] = defaultdict(lambda: [0, 0.0, 0])  # event kind → [events, seconds, statements]
        self.statements = 0  # SQL statements sent so far (a cost that does not depend on the machine's load)
        self.woken: set[tuple[str, datetime]] = set()  # (entry key, when) of wakes scheduled for a product time
        self.reviews: Counter = Counter()  # staff review outcomes
        self.wakes: dict[tuple[str, datetime], datetime] = {}  # (entry key, when) of quiet-hour wakes
        self.redispatched: set[tuple[str, datetime]] = set()  # (vacancy ref, waiting_until) scheduled once
        self.pending: dict[tuple[str, str], datetime] = {}  # (status, vacancy ref) → its pending review/redispatch
        self.world: World | None = None
        # Standing bookings (dispatch answered BOOKED): offer ref → {entry, vacancy, release_until, case, ...}.
        self.standing: dict[str, dict] = {}
        self.releases_refused: Counter = Counter()
        self.trace: list[tuple[datetime, str, str]] = []  # (when, vacancy ref, dispatch outcome)

    def at(self, when: datetime, kind: str, *args) -> None:
        heapq.heappush(self.queue, (when, next(self.seq), kind, args))

    def once(self, when: datetime, kind: str) -> None:
        """A job tick (expire, deliver) at ``when``, once however many offers are due then."""
        if (kind, when) not in self.scheduled:
            self.scheduled.add((kind, when))
            self.at(when, kind)

    def _count(self, execute, sql, params, many, context):
        self.statements += 1
        return execute(sql, params, many, context)

    def run(self) -> dict:
        from django.db import connection

        month = self.month
        with (time_machine.travel(month.start - timedelta(days=1), tick=False) as clock, adapter.no_task_queue(),
              adapter.flag_reads_cached(), adapter.matcher_clock_stopped(), connection.execute_wrapper(self._count),
              contextlib.ExitStack() as stack):
            started = time.perf_counter()
            self.world = adapter.setup(month, self.spec, self.run_label)
            self.cost["setup"] = [1, time.perf_counter() - started, self.statements]
            stack.enter_context(adapter.policy_reads_cached())  # published at set-up, never changed after
            self.entry_keys = _Reverse(self.world.entry_refs)
            self.booking_of = {f"appointment:{ref}": b for b in month.bookings
                               for ref in [self.world.appointment_refs.get(b.key)] if ref}
            for entry in month.entries:
                self.at(entry.arrives_at, "arrive", entry)
                if entry.opt_out_at is not None and entry.opt_out_at < month.end:
                    self.at(entry.opt_out_at, "opt_out", entry)
            for booking in month.cancellations:
                self.at(booking.cancel_at, "cancel", booking)
            t = month.start
            while t < month.end:
                self.at(t, "reconcile")
                t += RECONCILE_EVERY
            while self.queue:
                when, _, kind, args = heapq.heappop(self.queue)
                clock.move_to(when)
                started, statements = time.perf_counter(), self.statements
                if kind != "wake":  # a wake changes nothing unless it dispatches (``_dispatch`` counts that)
                    self.changes += 1
                getattr(self, f"_on_{kind}")(when, *args)
                self.closing = kind in CLOSES_OFFERS
                self._sync(when, offers_may_change=kind in CHANGES_OFFERS)
                self.cost[kind][0] += 1
                self.cost[kind][1] += time.perf_counter() - started
                self.cost[kind][2] += self.statements - statements
            started, statements = time.perf_counter(), self.statements
            self._wind_down(clock)
            log = adapter.export(self.world)
            log["standing"] = [{k: v for k, v in s.items() if k != "release_until"} for s in self.standing.values()]
            self.cost["wind_down_export"] = [1, time.perf_counter() - started, self.statements - statements]
            return log

    # --- events ----------------------------------------------------------------------------------

    def _dispatch(self, now, vacancy_ref):
        result = adapter.dispatch(self.world, vacancy_ref, now)
        self.trace.append((now, vacancy_ref, result[0]))  # what each dispatch answered (``sim.diagnose`` reads it)
        self.changes += 1
        self.offered |= result[0] in ("OFFERED", "BOOKED")
        self.waits |= result[0] in ("WAITING", "STAFF_REVIEW")
        return result

    def _on_arrive(self, now, entry):
        adapter.entry_add(self.world, entry, now)
        self._on_wake(now, entry)

    def _on_wake(self, now, entry):
        """What the product's next reconcile does for a new or newly eligible candidate. In quiet hours
        dispatch would only answer WAITING: the wake moves to their end (the product's reconcile
        dispatches then). Vacancies this entry was already offered are left out (the matcher never
        offers one twice), so are those with an offer out (dispatch would answer ALREADY_OFFERED)."""
        if self.spec.quiet_hours and in_quiet_hours(now, self.month):
            when = next_send_time(now, self.month)
            if (entry.key, when) not in self.wakes:
                self.wakes[(entry.key, when)] = when
                self.at(when, "wake", entry)
            return
        entry_ref = self.world.entry_refs.get(entry.key)
        if entry_ref is None or entry_ref in self.booked:
            return
        minutes = timedelta(minutes=self.month.params.slot_minutes)
        due = []
        for ref, key in self._open_vacancies(now):
            b = self.booking_of[key]
            if entry_ref not in self.asked[ref] and fits(entry, b.practitioner, b.starts_at, b.starts_at + minutes,
                                                         self.month.params.timezone,
                                                         ignore_practitioner=not self.spec.use_practitioner,
                                                         ignore_availability=not self.spec.use_availability):
                due.append(ref)
        # The product's own eligibility (its cap, suppression and every other rule, one read-only query per
        # vacancy) decides which of them this entry may be offered now; only those are dispatched. Where it
        # may not, its wake comes at a time the product's rows name (``_wake_at_product_times``).
        for ref in adapter.eligible_vacancies(self.world, entry.key, due, now):
            if self._dispatch(now, ref)[1] == self.world.entry_ids[entry.key]:
                break  # offered this entry: no longer a candidate for the others

    def _open_vacancies(self, now) -> list[tuple[str, str]]:
        """``adapter.open_vacancies_without_offer`` once per instant while no event could have changed it: the
        wakes of one instant (the end of quiet hours, a cascade's closed offers) that dispatch nothing share it."""
        key = (now, self.changes)
        if self.open_read[0] != key:
            self.open_read = (key, adapter.open_vacancies_without_offer(self.world, now))
        return self.open_read[1]

    def _on_redispatch(self, now, vacancy_ref):
        """A vacancy that waited (quiet hours, contact caps) at the moment it may go on: dispatched as
        the product's reconcile would, unless it has an offer out or waits for staff (reconcile leaves
        a REVIEW vacancy to staff)."""
        self._handled(("OPEN", vacancy_ref), now)
        if ("REVIEW", vacancy_ref) in self.pending:
            return
        if not any(self.offers[ref]["vacancy"] == vacancy_ref for ref in self.active):
            self._dispatch(now, vacancy_ref)

    def _on_release(self, now, offer_ref):
        """The patient releases a standing booking from its notice (the product refuses once its job released
        it, or past ``release_until``)."""
        outcome, vacancy_ref = adapter.release(self.world, offer_ref, now)
        if outcome != "RELEASED":
            self.releases_refused[outcome] += 1
            if self.standing[offer_ref]["released_at"] is None:
                self.standing[offer_ref]["case"] = "KEPT_RELEASE_REFUSED"
            return
        self.standing[offer_ref]["case"] = "RELEASED"
        self._released(now, offer_ref, vacancy_ref)

    def _on_acknowledge(self, now, offer_ref):
        """The patient opens their booking's link and would come: the product's ``acknowledgement_record`` (its job
        then leaves the booking alone); too late once the job released it."""
        adapter.acknowledge(self.world, offer_ref, now)
        if self.standing[offer_ref]["released_at"] is None:
            self.standing[offer_ref].update(case="ACCEPTED", acknowledged_at=now)

    def _on_ack_job(self, now):
        """The product's acknowledgement job (``acknowledgements_run``) at a booking's ``remind_at`` or
        ``release_at``: reminders queued (delivered now, or when quiet hours end), unacknowledged bookings
        released; each release is dispatched as the patient's is."""
        released, pending = adapter.acknowledgements(self.world, now)
        self.delivered = True  # its reminders went through the outbox worker, which sends whatever else is due
        for offer_ref, vacancy_ref in released:
            self.standing[offer_ref]["case"] = "RELEASED_UNACKNOWLEDGED"
            self._released(now, offer_ref, vacancy_ref)
        for when in pending:
            self.once(when, "deliver")

    def _released(self, now, offer_ref, vacancy_ref):
        """A standing booking released (by the patient or the product's job): the product reopened the same
        vacancy and would queue its dispatch after commit (dropped here: ``no_task_queue``), so it is dispatched
        now (the cascade); the entry waits again, a candidate for other slots now and for this kind once its
        suppression ends."""
        offer = self.offers[offer_ref]
        self.standing[offer_ref]["released_at"] = now
        self.booked.discard(offer["entry"])
        self._dispatch(now, vacancy_ref)
        self.at(now, "wake", self.month.by_key[self.entry_keys[offer["entry"]]])
        until = adapter.entry_suppressed_until(self.world, self.entry_keys[offer["entry"]])
        if until is not None and until > now:
            self._wake_later(until, offer_ref)

    def _on_review(self, now, vacancy_ref):
        self._handled(("REVIEW", vacancy_ref), now)
        self.offered = self.waits = True
        outcome = adapter.review(self.world, vacancy_ref, now)
        self.reviews[outcome] += 1
        self.trace.append((now, vacancy_ref, f"REVIEW_{outcome}"))

    def _handled(self, key, now) -> None:
        if self.pending.get(key) == now:
            del self.pending[key]

    def _on_opt_out(self, now, entry):
        adapter.entry_opt_out(self.world, entry, now)

    def _on_cancel(self, now, booking):
        vacancy = adapter.cancel(self.world, booking, now)
        if vacancy is not None:
            self._dispatch(now, vacancy)

    def _on_expire(self, now):
        """The expiry job, when an active offer is due (else it would find nothing: skipped)."""
        if any(self.offers[ref]["expires"] <= now for ref in self.active):
            adapter.expire(now)  # the expiry job's step that changes outcomes (not its JobRun bookkeeping)

    def _on_deliver(self, now):
        self._deliver(now)

    def _deliver(self, now) -> None:
        """The outbox worker; only a delivery changes what the awaited notices' rows say (``_notices``)."""
        adapter.deliver(now)
        self.delivered = True

    def _on_reconcile(self, now):
        self.offered = self.waits = True
        adapter.reconcile(now)

    def _on_reply(self, now, offer_ref, kind):
        if offer_ref not in self.active:
            # The offer expired (or was withdrawn) before the patient answered. A yes may still take the time
            # while it is free (the product's late accept, where the policy has it); anything else is late.
            if kind == "ACCEPT" and self.world.policy.late_accept and offer_ref in self.offers:
                outcome = adapter.late_accept(self.world, offer_ref, now)
                self.late_accepts[outcome] += 1
                if outcome == "BOOKED":
                    self.booked.add(self.offers[offer_ref]["entry"])
                    self.offered = True  # the renewed offer is registered by the next sync
                    return
            self.replies_late += 1
            return
        outcome = adapter.accept(self.world, offer_ref, now) if kind == "ACCEPT" else adapter.decline(
            self.world, offer_ref, now)
        if outcome == "BOOKED":
            self.active.discard(offer_ref)  # a booked offer stays ACCEPTED: nothing more to follow
            self.booked.add(self.offers[offer_ref]["entry"])
        elif outcome == "DECLINED":
            # A candidate again when the product's suppression ends (the entry row says when, if at all).
            until = adapter.entry_suppressed_until(self.world, self.entry_keys[self.offers[offer_ref]["entry"]])
            if until is not None and until > now:
                self._wake_later(until, offer_ref)
        elif outcome not in ("BOOKED", "DECLINED"):
            self.replies_late += 1

    def _wake_later(self, when: datetime, offer_ref: str) -> None:
        """A wake for the offer's entry at a time a product row names, once per (entry, time)."""
        entry_key = self.entry_keys[self.offers[offer_ref]["entry"]]
        if when < self.month.end and (entry_key, when) not in self.woken:
            self.woken.add((entry_key, when))
            self.at(when, "wake", self.month.by_key[entry_key])

    # --- bookkeeping after every event ------------------------------------------------------------

    def _sync(self, now: datetime, offers_may_change: bool) -> None:
        """Register new offers (expiry event, notice), deliver, schedule replies, run the cascade.

        Offers are only made by dispatch (its callers: the engine, staff review, reconcile), so the
        new-offer and waiting-vacancy reads run only after one of those.
        """
        if not offers_may_change:
            self._notices()
            return
        for _ in range(50):  # a cascade can make more offers; bounded
            new = adapter.offers_since(self.world, self.last_offer_id) if self.offered else []
            self.offered = False
            for row in new:
                self.last_offer_id = row["id"]
                self.offers[row["ref"]] = {"id": row["id"], "vacancy": row["vacancy__ref"], "entry": row["entry__ref"],
                                           "vacancy_key": row["vacancy__vacancy_key"], "expires": row["expires_at"]}
                self.asked[row["vacancy__ref"]].add(row["entry__ref"])
                self.awaiting_notice.add(row["ref"])
                if self.world.weekly_cap:
                    # A week after each offer the product's weekly count drops by one: a candidate again then
                    # if the cap held them back (the wake asks the product's eligibility, which decides).
                    self._wake_later(row["created_at"] + timedelta(days=7), row["ref"])
                if row["renews_id"] is not None:
                    # A late accept (the patient's reply, or dispatch taking up a kept yes): claimed and booked
                    # when made; nothing to answer or expire.
                    self.booked.add(row["entry__ref"])
                    continue
                if row["standing"]:
                    # Booked at once on the patient's standing word: nothing to answer or expire; the booking
                    # notice (its one message) decides whether they release it.
                    self.booked.add(row["entry__ref"])
                    self.standing[row["ref"]] = {
                        "entry": self.entry_keys[row["entry__ref"]],
                        "vacancy": self.booking_of[row["vacancy__vacancy_key"]].key,
                        "release_until": row["release_until"], "case": "UNREAD", "released_at": None,
                        "acknowledged_at": None}
                    if self.spec.release_unacknowledged:
                        # The product's job reminds and releases at the times its BookingAck row names.
                        for when in adapter.ack_times_stored(row["id"]):
                            self.once(when, "ack_job")
                    continue
                self.active.add(row["ref"])
                self.once(row["expires_at"], "expire")
            if new:
                self._deliver(now)
            self._notices()
            if not self._cascade(now):
                break
        if self.waits:
            self.waits = False
            self._waiting(now)

    def _waiting(self, now: datetime) -> None:
        """Vacancies that wait: OPEN ones until their ``waiting_until`` (dispatch again then), REVIEW ones
        until staff look (``staff_review_minutes`` later, in clinic hours)."""
        for ref, status, until in adapter.waiting_vacancies(self.world, now):
            when = staff_time(now, self.month) if status == "REVIEW" else until
            key = (status, ref)
            if status == "REVIEW":
                if key in self.pending:
                    continue  # staff will look at it then
            elif until is None or until <= now or (ref, until) in self.redispatched:
                continue  # a past waiting_until (its dispatch ran), or one already scheduled
            else:
                self.redispatched.add((ref, until))
            self.pending[key] = when
            self.at(when, "review" if status == "REVIEW" else "redispatch", ref)

    def _notices(self) -> None:
        if not self.awaiting_notice or not self.delivered:
            return  # nothing delivered since the last read: the rows say what they said then
        self.delivered = False
        entry_keys = self.entry_keys
        # The notices' outbox rows with, for offer notices, the offer's notified_at and expires_at (one read).
        found = adapter.notices(list(self.awaiting_notice), [r for r in self.awaiting_notice if r in self.standing])
        for ref in sorted(found, key=lambda r: self.offers[r]["id"]):  # offer order: reproducible
            status, sent_at, next_at, window = found[ref]
            if sent_at is not None and ref in self.standing:
                self.awaiting_notice.discard(ref)
                self._booking_read(ref, sent_at)
            elif sent_at is not None:
                self.awaiting_notice.discard(ref)
                offer = self.offers[ref]
                booking = self.booking_of[offer["vacancy_key"]]
                # The product moved the offer's expires_at when the notice was delivered: read it, never
                # recompute it (the window rule is the product's).
                notified_at, offer["expires"] = window
                self.once(offer["expires"], "expire")
                reply = self.month.reply(entry_keys[offer["entry"]], booking)
                if reply.kind != "NONE":
                    self.at(self.month.answer_at(notified_at or sent_at, reply), "reply", ref, reply.kind)
            elif status == "PENDING" and next_at is not None:
                self.once(next_at, "deliver")
            elif status in ("SENT", "DEAD"):
                self.awaiting_notice.discard(ref)  # skipped (offer closed first) or failed: never seen

    def _booking_read(self, offer_ref: str, sent_at: datetime) -> None:
        """A standing booking's notice was delivered: when the patient acts on it (the no-show draw is the
        metrics'). A yes read before the slot acknowledges it; a no read before ``release_until`` releases it; a
        no read later is a late decline. The product's job may release it first (``_on_ack_job``)."""
        booking = self.standing[offer_ref]
        slot = self.month.bookings_by_key[booking["vacancy"]]
        reply = self.month.reply(booking["entry"], slot)
        if reply.kind == "NONE":
            return
        acts = self.month.answer_at(sent_at, reply)
        if reply.kind == "ACCEPT":
            if acts < slot.starts_at:
                self.at(acts, "acknowledge", offer_ref)
        elif booking["release_until"] is not None and acts < booking["release_until"]:
            self.at(acts, "release", offer_ref)
        else:
            booking["case"] = "LATE_DECLINE"

    def _cascade(self, now: datetime) -> bool:
        """Closed offers' vacancies are dispatched again now (the product's on-commit cascade), in
        vacancy order (reproducible: which vacancy asks first decides who gets which)."""
        if not self.active or not self.closing:
            return False
        self.closing = False  # the dispatches below make offers; they close none
        # One read: each offer's state and whether its vacancy is open for the next offer (OPEN, not started, no
        # active offer), so the cascade needs no second query.
        states = adapter.offer_states_with_vacancy(self.world, list(self.active), now)
        closed = {ref: status for ref, (status, _, _) in states.items() if status not in ACTIVE}
        self.active -= set(closed)
        for ref, status in closed.items():
            if status == "WITHDRAWN":  # the matcher may offer it again (a non-barring withdrawal)
                self.asked[self.offers[ref]["vacancy"]].discard(self.offers[ref]["entry"])
            # Back on the list (expired, declined, withdrawn): a candidate for the other open vacancies
            # now, as the product's next reconcile finds (unless a cap or a suppression holds it back).
            self.at(now, "wake", self.month.by_key[self.entry_keys[self.offers[ref]["entry"]]])
        due = sorted({(vacancy_id, self.offers[ref]["vacancy"]) for ref in closed
                      for _, vacancy_id, open_now in [states[ref]] if open_now})
        due = [ref for _, ref in due]  # in vacancy order, as the product's reconcile
        for vacancy in due:
            self._dispatch(now, vacancy)
        return bool(due)

    def _wind_down(self, clock) -> None:
        """Past the month every vacancy has started: reconcile closes them, and the next run (same
        dates, another clinic) finds nothing of this one left to dispatch or deliver."""
        after = self.month.end + timedelta(days=2)
        clock.move_to(after)
        adapter.reconcile(after)
        adapter.deliver(after)


def staff_time(now: datetime, month: Month) -> datetime:
    """When staff get to a review opened at ``now``: ``staff_review_minutes`` later, moved to the next
    weekday's opening if that falls outside clinic hours."""
    from zoneinfo import ZoneInfo

    p = month.params
    local = (now + timedelta(minutes=p.staff_review_minutes)).astimezone(ZoneInfo(p.timezone))
    while local.weekday() >= 5 or not (p.open_hour <= local.hour < p.close_hour):
        nxt = local.replace(hour=p.open_hour, minute=0, second=0, microsecond=0)
        local = nxt if local.hour < p.open_hour and local.weekday() < 5 else nxt + timedelta(days=1)
    return local


class _Reverse(dict):
    """ref → key of a dict that keeps growing (entries arrive during the run)."""

    def __init__(self, forward: dict):
        super().__init__()
        self.forward = forward

    def __missing__(self, ref):
        self.update({v: k for k, v in self.forward.items()})
        return dict.__getitem__(self, ref)


def replay(month: Month, spec: PolicySpec, run_label: str) -> tuple[dict, dict]:
    """Run ``spec`` on ``month`` through the real services; returns (log, counters)."""
    r = Replay(month, spec, run_label)
    log = r.run()
    cost = {kind: {"events": n, "seconds": round(sec, 2), "statements": q}
            for kind, (n, sec, q) in sorted(r.cost.items())}
    return log, {"replies_after_close": r.replies_late, "late_accepts": dict(r.late_accepts),
                 "staff_reviews": dict(r.reviews), "engine_cost": cost,
                 "statements": r.statements, "rules": adapter.policy_rules(r.world)}
