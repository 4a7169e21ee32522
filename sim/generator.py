"""A seeded clinic month: bookings, cancellations, waitlist arrivals and patient behaviour.

Pure Python (``random.Random(seed)``), no database: the same seed and scale give the same month, and
every policy is run on that one month. Each distribution is a named parameter in ``Params`` with the
source it was calibrated on (docs/simulation.md cites them); where there is no source, the
parameter says it is an assumption.

Patient behaviour does not depend on the order in which a policy asks: ``reply(patient, vacancy)``
is a pure function of (seed, patient, vacancy), so a patient answers the same offer the same way
whichever policy makes it and whenever.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import asdict, dataclass, field
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from waitlist.joining import availability as product_availability

MONTH_START = "2030-03-04"  # a Monday; the clinic's local midnight starts the month


@dataclass(frozen=True)
class Params:
    """Distributions of one clinic month (named so docs/simulation.md can cite each)."""

    days: int = 28
    practitioners: int = 2
    timezone: str = "Asia/Seoul"
    open_hour: int = 9  # clinic day 09:00–18:00 local, 30-minute visits, weekdays
    close_hour: int = 18
    slot_minutes: int = 30
    booked_share: float = 0.85  # assumption: a busy clinic books 85% of its slots ahead
    # Booking lead (booking → visit), days: exponential with this mean, capped (MDM 2024: 4–12 week horizons).
    booking_lead_mean_days: float = 21.0
    booking_lead_max_days: float = 84.0
    # Cancellation probability grows with the booking lead (VHA 2008: 19% at month 1 → 50% by month 12);
    # p = base + slope · lead_months, capped. Assumption: the outpatient share within 3 months.
    cancel_base: float = 0.10
    cancel_per_month: float = 0.09
    cancel_max: float = 0.5
    # When a cancellation happens before the visit (neurology 2024: about half are late ones).
    same_day_share: float = 0.25  # 0–8 h before the visit, same day
    overnight_share: float = 0.25  # 8–36 h before: the evening or night before
    # Waitlist: a backlog at the start plus arrivals through the month (assumption).
    backlog_per_practitioner: int = 14
    arrivals_per_practitioner_day: float = 0.9
    backlog_max_wait_days: float = 120.0
    named_share: float = 0.4  # entries that name one practitioner; the rest take anyone
    window_min_days: float = 3.0
    window_max_days: float = 21.0
    # Priority bands: 0 routine, 1 soon, 2 urgent (assumption: most are routine).
    band_weights: tuple[float, float, float] = (0.8, 0.15, 0.05)
    # The patient's current (later) appointment: days after the window ends (days sooner gained).
    current_after_window_days: float = 14.0
    opt_out_share: float = 0.05  # assumption: 5% opt out of waitlist messages during the month
    # When the patient can come: the product's entry field (``waitlist.joining.availability``, a 21-bit mask of
    # 7 days x 3 parts of the day, clinic-local; the matcher's rule UNAVAILABLE). Assumption (no published figure):
    # this share tick "any time"; the others name the clinic's weekdays they can come, each with
    # ``availability_day_share`` (at least one), and the parts of the day, each with ``availability_part_share``
    # (at least one). Drawn from the patient's own stream: the month's other facts do not move with these.
    availability_any_share: float = 0.4
    availability_day_share: float = 0.6
    availability_part_share: float = 0.6
    # Behaviour. Each patient reads one channel, text (SMS) or e-mail (DrDoctor survey: 52% prefer SMS), the same
    # under every policy. A share of each channel's patients never reads any notice (SILENT); of the others,
    # ``slow_share`` reply within hours (lognormal, median ``slow_median_minutes``), the rest within minutes
    # (median ``fast_median_minutes``); an e-mail reader's delays are ``email_delay_factor`` times a text
    # reader's. All assumptions except ``sms_share`` (docs/simulation.md gives their low and high values).
    sms_share: float = 0.52
    sms_silent_share: float = 0.2
    email_silent_share: float = 0.4
    slow_share: float = 0.43
    fast_median_minutes: float = 6.0
    slow_median_minutes: float = 150.0
    email_delay_factor: float = 2.0
    reply_sigma: float = 0.9
    # Assumption: patients do not read messages while asleep. A notice that reaches them between these
    # hours is read at their end, and a reply that would fall between them comes at their end instead.
    asleep_start: str = "23:00"
    asleep_end: str = "07:00"
    # Probability that a reply is an accept (Fast Pass: 11% per offer overall, 30% of open slots filled).
    accept_share: float = 0.35
    # Booking-reliability decisions (the REQUIRED gate reads them). Assumption: the feed has a FRESH decision
    # for all but this share of waiting patients; for the rest dispatch sends the vacancy to staff review
    # (the product's default action), and staff resolve it this long after it opened, during clinic hours.
    decision_unavailable_share: float = 0.1
    staff_review_minutes: float = 60.0
    # Standing acceptance ("book me automatically", issue #22 part 2): dispatch books such a patient at once and
    # sends a booking notice with a release link. Assumption (no published figure): this share of entries opt in
    # when they join, with the minimum notice drawn from these (minutes, weights; assumption: at once, 3 h, a day).
    standing_share: float = 0.3
    standing_notice_minutes: tuple[int, ...] = (0, 180, 1440)
    standing_notice_weights: tuple[float, ...] = (0.4, 0.4, 0.2)
    # A kept booking that does not end in a visit (a no-show). A booking the patient would have accepted (by reply,
    # or a standing one they acknowledged): Fast Pass (JMIR 2024), 18% of accepted offers did not end in a visit
    # (5,399 visits of 6,603 accepts). A standing booking never acknowledged is never attended (a patient who never
    # learns they were moved does not come: no parameter). One they would have declined but read only after its
    # release deadline: they do not come (assumption: 1.0, low 0.5).
    no_show_accepted: float = 0.18
    no_show_late_decline: float = 1.0
    quiet_start: str = "21:00"
    quiet_end: str = "08:00"
    contact_cap_per_day: int = 3

    def to_dict(self) -> dict:
        return asdict(self)


SCALES = {
    "tiny": Params(days=3, practitioners=1, backlog_per_practitioner=6, arrivals_per_practitioner_day=1.0),
    # One clinic, one practitioner, a 28-day month: the "clinic month" of the issue at a cost that fits the
    # 3-minute budget (every policy × 3 seeds); `full` runs three clinics of five practitioners.
    "default": Params(practitioners=1),
    "full": Params(practitioners=5),
}


@dataclass(frozen=True)
class Booking:
    key: str
    practitioner: int
    starts_at: datetime
    booked_at: datetime
    cancel_at: datetime | None


@dataclass(frozen=True)
class Entry:
    key: str
    patient: str
    arrives_at: datetime
    waiting_since: datetime
    practitioner: int | None  # None: any practitioner
    earliest: datetime
    latest: datetime
    band: int
    current_at: datetime  # the patient's already-booked later visit
    opt_out_at: datetime | None
    responsiveness: str  # FAST, SLOW, SILENT
    channel: str = "EMAIL"  # SMS or EMAIL: the one channel the patient reads
    availability: int = product_availability.ANY_TIME  # the product's mask: when they can come


@dataclass
class Month:
    seed: int
    params: Params
    clinic_label: str
    start: datetime
    end: datetime
    bookings: list[Booking] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)

    @property
    def cancellations(self) -> list[Booking]:
        return sorted((b for b in self.bookings if b.cancel_at is not None), key=lambda b: (b.cancel_at, b.key))

    def index(self) -> Month:
        self.by_key = {e.key: e for e in self.entries}
        self.bookings_by_key = {b.key: b for b in self.bookings}
        return self

    def fingerprint(self) -> str:
        """A digest of everything generated (the determinism test compares it)."""
        text = repr((self.seed, self.clinic_label, self.bookings, self.entries))
        return hashlib.sha256(text.encode()).hexdigest()

    def has_decision(self, entry_key: str) -> bool:
        """Whether the reliability feed has a decision for the entry's patient (its own draw, so the
        month's other facts do not move with this parameter)."""
        draw = _rng(self.seed, self.clinic_label, "decision", self.by_key[entry_key].patient).random()
        return draw >= self.params.decision_unavailable_share

    def reply(self, entry_key: str, booking: Booking) -> Reply:
        """How the entry's patient answers an offer of ``booking``'s slot (same for every policy). Offered
        another practitioner than the one they named (only a policy that ignores names does that), a
        patient who would have accepted declines."""
        entry = self.by_key[entry_key]
        reply = reply_for(self.seed, self.params, entry.responsiveness, entry.patient, booking.key, entry.channel)
        if reply.kind == "ACCEPT" and (entry.practitioner not in (None, booking.practitioner)
                                       or not self.available(entry_key, booking.starts_at)):
            return Reply("DECLINE", reply.delay)
        return reply

    def available(self, entry_key: str, starts_at: datetime) -> bool:
        """Whether the entry's patient can come at ``starts_at`` (their stated availability, the product's rule)."""
        return product_availability.fits(self.by_key[entry_key].availability, starts_at, self.params.timezone)

    def standing_notice(self, entry_key: str) -> int | None:
        """The minimum notice (minutes) the entry's patient asks for when they opt in to automatic booking at
        joining, or None when they do not (their own draw: the month's other facts do not move with it)."""
        p = self.params
        rng = _rng(self.seed, self.clinic_label, "standing", self.by_key[entry_key].patient)
        if rng.random() >= p.standing_share:
            return None
        return rng.choices(p.standing_notice_minutes, weights=p.standing_notice_weights)[0]

    def no_show(self, entry_key: str, booking: Booking, case: str) -> bool:
        """Whether a kept booking of ``booking``'s slot ends without a visit; ``case`` is ACCEPTED (they would have
        accepted, and a standing booking was acknowledged) or LATE_DECLINE (read after its release deadline). One
        draw per (seed, patient, slot): every policy meets the same no-shows."""
        p = self.params
        share = {"ACCEPTED": p.no_show_accepted, "LATE_DECLINE": p.no_show_late_decline}[case]
        return _rng(self.seed, "no_show", self.by_key[entry_key].patient, booking.key).random() < share

    def answer_at(self, sent_at: datetime, reply: Reply) -> datetime:
        """When a reply to a notice sent at ``sent_at`` comes: its delay after the patient reads the
        notice, neither reading nor replying while asleep."""
        return self.awake(self.awake(sent_at) + reply.delay)

    def awake(self, at: datetime) -> datetime:
        """``at``, or the end of the patient's night if ``at`` falls inside it."""
        p = self.params
        local = at.astimezone(ZoneInfo(p.timezone))
        start, end = time.fromisoformat(p.asleep_start), time.fromisoformat(p.asleep_end)
        t = local.time()
        if not ((start <= t or t < end) if start > end else (start <= t < end)):
            return at
        wake = local.replace(hour=end.hour, minute=end.minute, second=0, microsecond=0)
        return wake if wake > local else wake + timedelta(days=1)


@dataclass(frozen=True)
class Reply:
    kind: str  # ACCEPT, DECLINE, NONE
    delay: timedelta  # after the notice reaches the patient


def _rng(*parts) -> random.Random:
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def reply_for(seed: int, params: Params, responsiveness: str, patient: str, vacancy_key: str,
              channel: str = "SMS") -> Reply:
    """How ``patient`` answers an offer of ``vacancy_key``: the same for every policy that asks."""
    rng = _rng(seed, "reply", patient, vacancy_key)
    if responsiveness == "SILENT":
        return Reply("NONE", timedelta(0))
    median = params.fast_median_minutes if responsiveness == "FAST" else params.slow_median_minutes
    if channel == "EMAIL":
        median *= params.email_delay_factor
    minutes = math.exp(rng.gauss(math.log(median), params.reply_sigma))
    kind = "ACCEPT" if rng.random() < params.accept_share else "DECLINE"
    return Reply(kind, timedelta(minutes=round(minutes, 2)))


def generate(seed: int, params: Params, clinic_index: int = 0) -> Month:
    """The month for one clinic; ``clinic_index`` makes several clinics of one seed differ."""
    rng = random.Random(f"{seed}:{clinic_index}")
    zone = ZoneInfo(params.timezone)
    start = datetime.combine(datetime.fromisoformat(MONTH_START).date(), time(0), tzinfo=zone)
    end = start + timedelta(days=params.days)
    month = Month(seed=seed, params=params, clinic_label=f"s{seed}c{clinic_index}", start=start, end=end)
    _bookings(month, rng, zone)
    _entries(month, rng)
    return month.index()


def _bookings(month: Month, rng: random.Random, zone: ZoneInfo) -> None:
    p = month.params
    n = 0
    for day in range(p.days):
        date = (month.start + timedelta(days=day)).date()
        if date.weekday() >= 5:
            continue
        for doc in range(p.practitioners):
            slot = datetime.combine(date, time(p.open_hour), tzinfo=zone)
            close = datetime.combine(date, time(p.close_hour), tzinfo=zone)
            while slot < close:
                if rng.random() < p.booked_share:
                    lead_days = min(rng.expovariate(1 / p.booking_lead_mean_days), p.booking_lead_max_days)
                    booked_at = slot - timedelta(days=max(lead_days, 0.5))
                    cancel_p = min(p.cancel_base + p.cancel_per_month * lead_days / 30, p.cancel_max)
                    cancel_at = None
                    if rng.random() < cancel_p:
                        cancel_at = _cancel_time(rng, p, booked_at, slot)
                    n += 1
                    month.bookings.append(Booking(f"b{n}", doc, slot, booked_at, cancel_at))
                slot += timedelta(minutes=p.slot_minutes)
    # Only cancellations inside the simulated month are replayed (earlier ones happened before it).
    month.bookings = [
        b if b.cancel_at is None or b.cancel_at >= month.start else Booking(b.key, b.practitioner, b.starts_at,
                                                                           b.booked_at, None)
        for b in month.bookings
    ]


def _cancel_time(rng: random.Random, p: Params, booked_at: datetime, starts_at: datetime) -> datetime:
    """How long before the visit the cancellation comes: same day, overnight, or earlier (uniform)."""
    u = rng.random()
    if u < p.same_day_share:
        before = timedelta(hours=rng.uniform(0.25, 8))
    elif u < p.same_day_share + p.overnight_share:
        before = timedelta(hours=rng.uniform(8, 36))
    else:
        before = timedelta(hours=rng.uniform(36, max(37.0, (starts_at - booked_at).total_seconds() / 3600)))
    return max(starts_at - before, booked_at + timedelta(minutes=1))


def _entries(month: Month, rng: random.Random) -> None:
    p = month.params
    arrivals: list[tuple[datetime, datetime]] = []
    for _ in range(p.backlog_per_practitioner * p.practitioners):
        arrivals.append((month.start, month.start - timedelta(days=rng.uniform(1, p.backlog_max_wait_days))))
    t = month.start
    rate = p.arrivals_per_practitioner_day * p.practitioners / 86400
    while True:
        t += timedelta(seconds=rng.expovariate(rate))
        if t >= month.end:
            break
        arrivals.append((t, t))
    for i, (arrives_at, since) in enumerate(arrivals, start=1):
        earliest = max(arrives_at, month.start) + timedelta(days=rng.uniform(0, 3))
        earliest = earliest.replace(minute=0, second=0, microsecond=0)
        latest = earliest + timedelta(days=rng.uniform(p.window_min_days, p.window_max_days))
        named = rng.random() < p.named_share
        u = rng.random()
        # The channel is the patient's own draw (the month's other facts do not move with ``sms_share``).
        channel = "SMS" if _rng(month.seed, month.clinic_label, "channel", i).random() < p.sms_share else "EMAIL"
        reads = 1 - (p.sms_silent_share if channel == "SMS" else p.email_silent_share)
        responsiveness = ("SILENT" if u >= reads else "SLOW" if u >= reads * (1 - p.slow_share) else "FAST")
        opt_out = None
        availability = availability_of(_rng(month.seed, month.clinic_label, "availability", i), p)
        if rng.random() < p.opt_out_share:
            opt_out = arrives_at + timedelta(days=rng.uniform(0.5, max(1.0, (month.end - arrives_at).days)))
        month.entries.append(
            Entry(
                key=f"e{i}",
                patient=f"p{i}",
                arrives_at=arrives_at,
                waiting_since=since,
                practitioner=rng.randrange(p.practitioners) if named else None,
                earliest=earliest,
                latest=latest,
                band=rng.choices((0, 1, 2), weights=p.band_weights)[0],
                current_at=latest + timedelta(days=rng.uniform(1, 2 * p.current_after_window_days)),
                opt_out_at=opt_out,
                responsiveness=responsiveness,
                channel=channel,
                availability=availability,
            )
        )


CLINIC_DAYS = product_availability.DAYS[:5]  # the clinic's weekdays (the month's bookings are Monday to Friday)


def availability_of(rng: random.Random, p: Params) -> int:
    """A patient's availability as the product's mask: any time, or the weekdays and parts of the day they name."""
    if rng.random() < p.availability_any_share:
        return product_availability.ANY_TIME
    days = [d for d in CLINIC_DAYS if rng.random() < p.availability_day_share] or [rng.choice(CLINIC_DAYS)]
    parts = ([x for x in product_availability.PARTS if rng.random() < p.availability_part_share]
             or [rng.choice(product_availability.PARTS)])
    return product_availability.mask_of(days, parts)


def fits(entry: Entry, practitioner: int, starts_at: datetime, ends_at: datetime, tz: str, *,
         ignore_practitioner: bool = False, ignore_availability: bool = False) -> bool:
    """The product's hard eligibility on the generated facts: window, practitioner and availability (the product's
    own ``availability.fits``). A policy that ignores a preference passes ``ignore_*`` (the peer's FIFO)."""
    if not ignore_practitioner and entry.practitioner is not None and entry.practitioner != practitioner:
        return False
    if not ignore_availability and not product_availability.fits(entry.availability, starts_at, tz):
        return False
    return entry.earliest <= starts_at and ends_at <= entry.latest
