"""Waitlist rows: entries, vacancies, offers (with their append-only event log), claim receipts,
the versioned clinic policy and the booking-reliability decisions read as input.

Every row carries its clinic (and tenant group) so the schema can be distributed by clinic.
State-bearing rows (entry, vacancy, offer) change only through ``common.cas.cas_update`` in
``waitlist.services``; the lock order is vacancy → offer → hold/allocation → entry → appointment.
"""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import DateTimeRangeField, RangeOperators
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Case, F, Func, Q, Value, When
from django.db.models.functions import Coalesce
from django.utils.translation import gettext_lazy as _

from common.models import AppendOnlyQuerySet
from common.refs import RefField
from waitlist.joining.availability import ANY_TIME


class EntryStatus(models.TextChoices):
    WAITING = "WAITING"
    OFFERED = "OFFERED"
    ACCEPTED = "ACCEPTED"
    BOOKED = "BOOKED"
    WITHDRAWN = "WITHDRAWN"


ENTRY_TRANSITIONS: dict[str, set[str]] = {
    EntryStatus.WAITING: {EntryStatus.OFFERED, EntryStatus.WITHDRAWN},
    # Back to WAITING when the offer is declined, expires or is withdrawn by staff.
    EntryStatus.OFFERED: {EntryStatus.ACCEPTED, EntryStatus.WAITING, EntryStatus.WITHDRAWN},
    EntryStatus.ACCEPTED: {EntryStatus.BOOKED, EntryStatus.WAITING, EntryStatus.WITHDRAWN},
    # Out of BOOKED only when the patient releases a standing-acceptance booking (WITHDRAWN when another live
    # entry of theirs already waits for the same treatment and time).
    EntryStatus.BOOKED: {EntryStatus.WAITING, EntryStatus.WITHDRAWN},
    EntryStatus.WITHDRAWN: set(),
}


#: The entry statuses in which the patient is still on the waiting list.
OPEN_ENTRY_STATUSES = (EntryStatus.WAITING, EntryStatus.OFFERED, EntryStatus.ACCEPTED)


class OfferStatus(models.TextChoices):
    OFFERED = "OFFERED"
    ACCEPTED = "ACCEPTED"
    DECLINED = "DECLINED"
    EXPIRED = "EXPIRED"
    WITHDRAWN = "WITHDRAWN"


OFFER_TRANSITIONS: dict[str, set[str]] = {
    OfferStatus.OFFERED: {
        OfferStatus.ACCEPTED,
        OfferStatus.DECLINED,
        OfferStatus.EXPIRED,
        OfferStatus.WITHDRAWN,
    },
    # ACCEPTED stays ACCEPTED after booking (the hold is CONSUMED, the entry BOOKED). An ACCEPTED
    # hold that reaches its expiry unbooked ends: ACCEPTED → EXPIRED (reason HOLD_EXPIRED).
    OfferStatus.ACCEPTED: {OfferStatus.WITHDRAWN, OfferStatus.EXPIRED},
    OfferStatus.DECLINED: set(),
    OfferStatus.EXPIRED: set(),
    OfferStatus.WITHDRAWN: set(),
}
ACTIVE_OFFER_STATUSES = (OfferStatus.OFFERED, OfferStatus.ACCEPTED)


def offer_withdrawable(offer_status: str, hold_status: str) -> bool:
    """Whether staff may still take the offer back: active and its hold not yet booked (``offer_withdraw``, and the
    console's withdraw control, ``selectors.ops_commands``)."""
    from scheduling.models import HoldStatus  # scheduling's models load first; no import cycle at module level

    return offer_status in ACTIVE_OFFER_STATUSES and hold_status != HoldStatus.CONSUMED
OFFER_TOPIC = "waitlist.offer_made"  # the outbox topic of an offer's notice
# A WITHDRAWN offer with one of these reasons was taken back by the system or by closing the vacancy
# (perhaps by mistake): it does not bar its entry from the same vacancy after a reopen.
NON_BARRING_WITHDRAW_REASONS = ("VACANCY_CLOSED", "NO_ACTIVE_HOLD")


class DeclineReason(models.TextChoices):
    """The reasons the claim page offers (codes, never free text from the patient)."""

    TIME_NOT_SUITABLE = "TIME_NOT_SUITABLE", _("This time does not suit me")
    NO_LONGER_NEEDED = "NO_LONGER_NEEDED", _("I no longer need this appointment")
    OTHER = "OTHER", _("Another reason")
    SMS_DECLINE = "SMS_DECLINE", _("Declined by text message")  # a NO reply; not offered on the page


class VacancyStatus(models.TextChoices):
    OPEN = "OPEN"
    REVIEW = "REVIEW"  # a STALE/UNAVAILABLE decision stopped automatic promotion: staff decide
    FILLED = "FILLED"
    CLOSED = "CLOSED"


VACANCY_TRANSITIONS: dict[str, set[str]] = {
    VacancyStatus.OPEN: {VacancyStatus.REVIEW, VacancyStatus.FILLED, VacancyStatus.CLOSED},
    VacancyStatus.REVIEW: {VacancyStatus.OPEN, VacancyStatus.FILLED, VacancyStatus.CLOSED},
    # A patient's release of a standing-acceptance booking gives the slot back to the cascade.
    VacancyStatus.FILLED: {VacancyStatus.OPEN},
    # Only the recovery command reopens a closed vacancy (waitlist_recover reopen-vacancy).
    VacancyStatus.CLOSED: {VacancyStatus.OPEN},
}
DISPATCHABLE_VACANCY_STATUSES = (VacancyStatus.OPEN, VacancyStatus.REVIEW)


class NonFreshAction(models.TextChoices):
    """What dispatch does when the best candidate's decision is STALE or UNAVAILABLE."""

    STAFF_REVIEW = "STAFF_REVIEW"
    FRESH_READ = "FRESH_READ"
    NEXT_CANDIDATE = "NEXT_CANDIDATE"


class DecisionGate(models.TextChoices):
    """Whether dispatch needs a FRESH booking-reliability decision to offer a candidate."""

    REQUIRED = "REQUIRED"  # no FRESH decision → the policy's stale/unavailable action
    NOT_USED = "NOT_USED"  # the clinic has no reliability service: eligible candidates are offered in order


class Confirmation(models.TextChoices):
    """What turns an ACCEPTED offer into a CONFIRMED appointment."""

    ON_ACCEPT = "ON_ACCEPT"  # the patient's accept on the claim page books at once
    BOOKING_COMMAND = "BOOKING_COMMAND"  # ACCEPTED waits for the booking command (staff or an API client)


class AnswerWindow(models.TextChoices):
    """How long a patient has to answer an offer (``waitlist.rules.windows``)."""

    FIXED = "FIXED"  # ``hold_minutes`` whatever the lead time
    LEAD_TIME = "LEAD_TIME"  # a share of the time left, between a floor and a ceiling


class SuppressionScope(models.TextChoices):
    """Which offers a decline holds back for ``decline_suppression_hours``."""

    SIMILAR = "SIMILAR"  # offers like the declined one: the same practitioner and the same part of the day
    ALL = "ALL"  # every offer to the entry


def _default_contact_cap() -> int:
    return int(getattr(settings, "NOTIFY_CONTACT_CAP_PER_DAY", 3))


class WaitlistPolicy(models.Model):
    """One version of a clinic's waitlist rules. A change is a new row (version + 1), never an edit;
    each offer records the version and a digest of the fields it was made under."""

    ref = RefField(prefix="wlp")
    clinic = models.ForeignKey(
        "scheduling.Clinic", on_delete=models.PROTECT, related_name="waitlist_policies"
    )
    version = models.PositiveIntegerField()
    hold_minutes = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    min_lead_minutes = models.PositiveIntegerField()
    stale_action = models.CharField(
        max_length=16, choices=NonFreshAction.choices, default=NonFreshAction.STAFF_REVIEW
    )
    unavailable_action = models.CharField(
        max_length=16, choices=NonFreshAction.choices, default=NonFreshAction.STAFF_REVIEW
    )
    page_size = models.PositiveIntegerField(default=50, validators=[MinValueValidator(1)])
    max_candidates = models.PositiveIntegerField(default=500, validators=[MinValueValidator(1)])
    max_pages = models.PositiveIntegerField(default=20, validators=[MinValueValidator(1)])
    time_budget_ms = models.PositiveIntegerField(default=2000, validators=[MinValueValidator(1)])
    # Defaults chosen by measurement (docs/simulation.md): with the short window for patients who do not answer,
    # a cap of 3 and 72 h held back the patients who answer; 8 a week stays under the peer's p95 of 10.
    decline_suppression_hours = models.PositiveIntegerField(
        default=6, help_text="after a decline the entry gets no offer (like the declined one) for this long"
    )
    weekly_offer_cap = models.PositiveIntegerField(
        null=True, blank=True, default=8, help_text="offers per patient in any 7 days; empty = no cap"
    )
    decision_gate = models.CharField(
        max_length=10,
        choices=DecisionGate.choices,
        default=DecisionGate.REQUIRED,
        help_text="REQUIRED: offer only on a FRESH booking-reliability decision; NOT_USED: no decision applies",
    )
    confirmation = models.CharField(
        max_length=16,
        choices=Confirmation.choices,
        default=Confirmation.ON_ACCEPT,
        help_text="ON_ACCEPT: the claim page's accept books at once; BOOKING_COMMAND: ACCEPTED waits for booking",
    )
    quiet_hours_start = models.TimeField(
        null=True, blank=True, help_text="clinic-local time from which no offer is made or sent (empty = none)"
    )
    quiet_hours_end = models.TimeField(
        null=True, blank=True, help_text="clinic-local time when offers resume (may be on the next day)"
    )
    contact_cap_per_day = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=_default_contact_cap,
        validators=[MinValueValidator(1)],
        help_text="notices per patient in any 24 h; a capped patient is passed over for now; empty = no cap",
    )
    answer_window = models.CharField(
        max_length=10,
        choices=AnswerWindow.choices,
        default=AnswerWindow.LEAD_TIME,
        help_text="FIXED: hold minutes to answer; LEAD_TIME: a share of the time left until the slot",
    )
    answer_window_percent = models.PositiveSmallIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="LEAD_TIME: the share (%) of the time until the slot that the patient gets to answer",
    )
    answer_window_min_minutes = models.PositiveIntegerField(
        default=20, validators=[MinValueValidator(1)], help_text="LEAD_TIME: the shortest answer window"
    )
    answer_window_max_minutes = models.PositiveIntegerField(
        default=480, validators=[MinValueValidator(1)], help_text="LEAD_TIME: the longest answer window"
    )
    answer_window_margin_minutes = models.PositiveIntegerField(
        default=60, help_text="every answer window ends at least this long before the slot starts"
    )
    answer_window_unanswered_after = models.PositiveSmallIntegerField(
        default=2,
        validators=[MinValueValidator(1)],
        help_text="a patient whose last this many offers went unanswered gets the short window below",
    )
    answer_window_unanswered_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=None,
        validators=[MinValueValidator(1)],
        help_text="the longest answer window of a patient whose recent offers went unanswered; empty = no limit",
    )
    unanswered_ask_last_after = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        default=2,
        validators=[MinValueValidator(1)],
        help_text="a patient whose last this many offers went unanswered is asked after every other candidate "
        "until they answer one; empty = never",
    )
    standing_acceptance = models.BooleanField(
        default=True,
        help_text="patients may pre-authorise automatic booking: dispatch books them at once, with a release link",
    )
    standing_release_minutes = models.PositiveIntegerField(
        default=720,
        help_text="a standing booking may be released this long after it was made (never within the answer margin)",
    )
    # Issue 39: an automatic booking counts once its patient has seen it (waitlist/texts/services/acknowledgement.py).
    ack_remind_after_minutes = models.PositiveIntegerField(
        default=120,
        help_text="an automatic booking its patient has not acknowledged is reminded no sooner than this long "
        "after it was made",
    )
    ack_remind_before_slot_hours = models.PositiveIntegerField(
        default=24,
        help_text="and no sooner than this long before its slot (the later of the two; always an hour before "
        "its release)",
    )
    late_accept = models.BooleanField(
        default=True,
        help_text="a patient who answers yes after their offer ended still gets the time while it is free "
        "(no other offer out, the lead time kept)",
    )
    decline_suppression_scope = models.CharField(
        max_length=10,
        choices=SuppressionScope.choices,
        default=SuppressionScope.SIMILAR,
        help_text="SIMILAR: a decline holds back offers of the same practitioner and part of the day; ALL: every offer",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    DIGEST_FIELDS = (
        "version",
        "hold_minutes",
        "min_lead_minutes",
        "stale_action",
        "unavailable_action",
        "page_size",
        "max_candidates",
        "max_pages",
        "time_budget_ms",
        "decline_suppression_hours",
        "weekly_offer_cap",
        "decision_gate",
        "confirmation",
        "quiet_hours_start",
        "quiet_hours_end",
        "contact_cap_per_day",
        "answer_window",
        "answer_window_percent",
        "answer_window_min_minutes",
        "answer_window_max_minutes",
        "answer_window_margin_minutes",
        "answer_window_unanswered_after",
        "answer_window_unanswered_minutes",
        "unanswered_ask_last_after",
        "decline_suppression_scope",
        "standing_acceptance",
        "standing_release_minutes",
        "ack_remind_after_minutes",
        "ack_remind_before_slot_hours",
        "late_accept",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["clinic", "version"], name="wl_policy_unique_clinic_version"),
            # Quiet hours are a pair (both or neither) and never an empty span.
            models.CheckConstraint(
                condition=(Q(quiet_hours_start__isnull=True) & Q(quiet_hours_end__isnull=True))
                | (
                    Q(quiet_hours_start__isnull=False)
                    & Q(quiet_hours_end__isnull=False)
                    & ~Q(quiet_hours_start=F("quiet_hours_end"))
                ),
                name="wl_policy_quiet_hours_pair",
            ),
            models.CheckConstraint(
                condition=Q(answer_window_min_minutes__lte=F("answer_window_max_minutes")),
                name="wl_policy_window_bounds",
            ),
        ]
        verbose_name_plural = "waitlist policies"

    def __str__(self) -> str:
        return f"{self.clinic_id} v{self.version}"

    #: Fields added after the first versions, with the value every version before them ran under (migrations
    #: 0010 and 0012 wrote it into those rows). At that value a field is left out of the digest, so a version's
    #: digest (the one its offers recorded) stays what it was when the offers were made.
    LEGACY_VALUES = {
        "answer_window": "FIXED",
        "answer_window_percent": 25,
        "answer_window_min_minutes": 20,
        "answer_window_max_minutes": 480,
        "answer_window_margin_minutes": 0,
        "decline_suppression_scope": "ALL",
        "standing_acceptance": False,
        "standing_release_minutes": 720,
        # Migration 0012: versions before it gave every patient the whole window.
        "answer_window_unanswered_after": 2,
        "answer_window_unanswered_minutes": None,
        # Migration 0014: versions before it kept every patient in their place in the order.
        "unanswered_ask_last_after": None,
        # Migration 0015: versions before it refused every answer after the window.
        "late_accept": False,
        # Migration 0020: versions before it reminded at the deployment's settings, whose defaults these are.
        "ack_remind_after_minutes": 120,
        "ack_remind_before_slot_hours": 24,
    }

    def digest(self) -> str:
        # Times serialize as ISO strings ("21:00:00"); everything else is already JSON.
        values = {k: getattr(self, k) for k in self.DIGEST_FIELDS}
        values = {k: v for k, v in values.items() if k not in self.LEGACY_VALUES or self.LEGACY_VALUES[k] != v}
        canonical = json.dumps(values, sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    #: Matcher budgets: engineering knobs, kept out of the ADMIN editor (they still count in the digest).
    TUNING_FIELDS = ("version", "page_size", "max_candidates", "max_pages", "time_budget_ms")

    @classmethod
    def editable_fields(cls) -> tuple[str, ...]:
        """The fields an ADMIN edits (console, API, ``waitlist_policy``): every digest field but the
        tuning ones, so a field added to ``DIGEST_FIELDS`` shows up in every editor by itself."""
        return tuple(name for name in cls.DIGEST_FIELDS if name not in cls.TUNING_FIELDS)

    def action_for(self, decision_status: str) -> str:
        return self.stale_action if decision_status == DecisionStatus.STALE else self.unavailable_action


class DecisionStatus(models.TextChoices):
    FRESH = "FRESH"
    STALE = "STALE"
    UNAVAILABLE = "UNAVAILABLE"
    # Recorded on an offer only: the clinic's decision gate was NOT_USED, so no decision applied.
    NOT_USED = "NOT_USED"


FEED_DECISION_STATUSES = (DecisionStatus.FRESH, DecisionStatus.STALE, DecisionStatus.UNAVAILABLE)


class BookingReliabilityDecision(models.Model):
    """A read-only input from the reliability service: the newest row per patient is current.

    This service never recomputes a decision; it only records what it was given.
    """

    ref = RefField(prefix="brd")
    decision_ref = models.CharField(max_length=80, help_text="the provider's id for this decision")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    patient = models.ForeignKey("scheduling.Patient", on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=12, choices=DecisionStatus.choices)
    priority_rank = models.IntegerField(default=0)
    expires_at = models.DateTimeField()
    received_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["clinic", "decision_ref"], name="wl_decision_unique_ref")
        ]
        indexes = [
            # Serves the per-page batch: newest decision of each candidate patient.
            models.Index(fields=["clinic", "patient", "-received_at", "-id"], name="wl_decision_latest"),
        ]

    def __str__(self) -> str:
        return self.decision_ref


#: Entry states that hold the patient's place for a window (``wl_entry_one_live_per_window``).
LIVE_ENTRY_STATUSES = (EntryStatus.WAITING, EntryStatus.OFFERED, EntryStatus.ACCEPTED)


class EntryWindow(Func):
    """``tstzrange(earliest, latest, '[)')``: the entry's window as a range, for the exclusion constraint."""

    function = "TSTZRANGE"
    output_field = DateTimeRangeField()


#: Added to the priority key of an entry that is asked last: past every rank the API can set.
ASKED_LAST_OFFSET = 1_000_000


class WaitlistEntry(models.Model):
    """A patient waiting for a slot of ``treatment`` (with ``practitioner``, or any if empty).

    ``earliest``/``latest`` are aware instants bounding the acceptable slot: a slot fits when
    ``earliest <= starts_at`` and ``ends_at <= latest``. Date-only API input is read in the clinic's
    time zone (earliest = 00:00 of that day, latest = 24:00 of that day).
    """

    #: The table ``common.cas`` checks every status write against.
    STATE_MACHINE = ("status", ENTRY_TRANSITIONS)

    ref = RefField(prefix="wle")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="waitlist_entries")
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    patient = models.ForeignKey(
        "scheduling.Patient", on_delete=models.PROTECT, related_name="waitlist_entries"
    )
    treatment = models.ForeignKey("scheduling.Treatment", on_delete=models.PROTECT, related_name="+")
    practitioner = models.ForeignKey(
        "scheduling.Practitioner", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # 0 for "any practitioner": an equality (unlike IS NULL) lets the planner read the matcher's
    # index in order for both slot_fit tiers, with no Sort node.
    practitioner_key = models.GeneratedField(
        expression=Coalesce(F("practitioner"), Value(0)),
        output_field=models.BigIntegerField(),
        db_persist=True,
    )
    resource_kind = models.CharField(
        max_length=40, blank=True, default="", help_text="needed resource kind; empty = no need"
    )
    earliest = models.DateTimeField()
    latest = models.DateTimeField()
    priority_rank = models.IntegerField(default=0)
    # Set when the patient's last offers went unanswered (the policy's ``unanswered_ask_last_after``), cleared by
    # their next answer: until then every other candidate is asked first (``responsiveness``).
    asked_last_since = models.DateTimeField(null=True, blank=True)
    # Stored negation so the matcher's order (asked last after the others, then priority DESC, waiting_since ASC,
    # id ASC) is one ascending row comparison that a btree index can seek to (keyset pagination). Ranks are
    # within ±ASKED_LAST_OFFSET / 2 (the API allows ±1000).
    priority_key = models.GeneratedField(
        expression=Case(When(asked_last_since__isnull=False, then=Value(ASKED_LAST_OFFSET)), default=Value(0))
        - F("priority_rank"),
        output_field=models.IntegerField(),
        db_persist=True,
    )
    waiting_since = models.DateTimeField()
    status = models.CharField(max_length=10, choices=EntryStatus.choices, default=EntryStatus.WAITING)
    version = models.PositiveIntegerField(default=1)
    suppressed_until = models.DateTimeField(null=True, blank=True)
    # A SIMILAR-scope decline holds back only offers like the declined one: its practitioner and the part of
    # the day of its start (``eligibility``'s SUPPRESSED rule). Both empty: every offer is held back.
    suppressed_practitioner = models.ForeignKey(
        "scheduling.Practitioner", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    suppressed_like_start = models.DateTimeField(
        null=True, blank=True, help_text="the declined slot's start (its part of the day); empty = all offers"
    )
    withdraw_reason = models.CharField(max_length=200, blank=True, default="")
    # When the patient can come (``joining.availability``: days of the week x parts of the day, clinic-local).
    availability = models.IntegerField(default=ANY_TIME, db_default=ANY_TIME,
                                       help_text="21-bit mask: bit day*3+part (Mon=0, morning=0)")
    # The patient's own pause (status page), or an unanswered upkeep question (``joining.upkeep``: paused until
    # resumed, ``PAUSED_UNTIL_RESUMED``): no offers before it.
    paused_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "waitlist entries"
        constraints = [
            models.CheckConstraint(condition=Q(latest__gt=F("earliest")), name="wl_entry_window_positive"),
            models.CheckConstraint(condition=Q(availability__gt=0, availability__lte=ANY_TIME),
                                   name="wl_entry_availability_some"),
            # One live entry per patient, treatment and overlapping window: a second one would dodge the weekly
            # cap and double the patient's chances. ACCEPTED counts: it returns to WAITING when its hold lapses.
            ExclusionConstraint(
                name="wl_entry_one_live_per_window",
                expressions=[
                    ("clinic", RangeOperators.EQUAL),
                    ("patient", RangeOperators.EQUAL),
                    ("treatment", RangeOperators.EQUAL),
                    (EntryWindow("earliest", "latest", Value("[)")), RangeOperators.OVERLAPS),
                ],
                condition=Q(status__in=LIVE_ENTRY_STATUSES),
            ),
        ]
        indexes = [
            # The matcher's index: equality on (clinic, treatment, practitioner_key) selects one
            # slot_fit tier (the vacancy's practitioner, or 0 = any), then the keyset order is the
            # index order. The window columns come last: they order nothing, but as key columns the
            # window test is an index condition checked on the index tuple, so an entry whose window
            # does not fit costs no heap fetch (issue 15: flat p99 with 7-day windows over 60 days).
            models.Index(
                fields=["clinic", "treatment", "practitioner_key", "priority_key", "waiting_since", "id", "earliest",
                        "latest"],
                name="wl_entry_match",
                condition=Q(status="WAITING"),
            ),
            models.Index(fields=["clinic", "patient", "status"], name="wl_entry_patient"),
            # The console's and the API's waiting list: keyset on (waiting_since, id) per clinic.
            models.Index(fields=["clinic", "waiting_since", "id"], name="wl_entry_waiting"),
        ]

    def __str__(self) -> str:
        return self.ref


class Vacancy(models.Model):
    """A freed slot looking for a waitlist candidate. ``vacancy_key`` names its origin (one per cancel)."""

    #: The table ``common.cas`` checks every status write against.
    STATE_MACHINE = ("status", VACANCY_TRANSITIONS)

    ref = RefField(prefix="vac")
    vacancy_key = models.CharField(max_length=120)
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="vacancies")
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    practitioner = models.ForeignKey("scheduling.Practitioner", on_delete=models.PROTECT, related_name="+")
    treatment = models.ForeignKey("scheduling.Treatment", on_delete=models.PROTECT, related_name="+")
    resource = models.ForeignKey(
        "scheduling.Resource", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    excluded_patient = models.ForeignKey(
        "scheduling.Patient", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    source_appointment = models.ForeignKey(
        "scheduling.Appointment", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    status = models.CharField(max_length=8, choices=VacancyStatus.choices, default=VacancyStatus.OPEN)
    version = models.PositiveIntegerField(default=1)
    close_reason = models.CharField(max_length=60, blank=True, default="")
    review_entry = models.ForeignKey(
        WaitlistEntry,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="the candidate whose decision sent the vacancy to staff review",
    )
    exhausted_at = models.DateTimeField(
        null=True, blank=True, help_text="when a dispatch first found no candidate left (the exhausted-list metric)"
    )
    late_yes_offer = models.ForeignKey(
        "Offer",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="an ended offer whose patient said yes late while the time was offered to someone else: the "
        "next offer of this vacancy goes to them (a late accept) if they still fit",
    )
    waiting_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="dispatch found nobody reachable now (quiet hours, contact caps): it resumes by itself then",
    )
    waiting_reason = models.CharField(
        max_length=40, blank=True, default="", help_text="why the vacancy waits (QUIET_HOURS, CONTACT_CAP)"
    )
    dispatch_claimed_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="a dispatcher loop claimed it (SKIP LOCKED) until then; others pass it by (a marker, not a state)",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Not stored: annotations the dispatch fence reads with the lock (services/promotion.py).
    active_offer_id: int | None
    policy_id_now: int | None
    has_shadow: bool

    class Meta:
        verbose_name_plural = "vacancies"
        constraints = [
            models.UniqueConstraint(fields=["clinic", "vacancy_key"], name="wl_vacancy_unique_key"),
            models.CheckConstraint(condition=Q(ends_at__gt=F("starts_at")), name="wl_vacancy_positive"),
        ]
        indexes = [
            models.Index(fields=["clinic", "status", "starts_at"], name="wl_vacancy_status"),
            # The console's vacancy list, newest first (keyset on created_at, id).
            models.Index(fields=["clinic", "-created_at", "-id"], name="wl_vacancy_recent"),
        ]

    def __str__(self) -> str:
        return self.ref


class Offer(models.Model):
    """One vacancy offered to one entry, backed by a capacity hold while OFFERED or ACCEPTED."""

    #: The table ``common.cas`` checks every status write against.
    STATE_MACHINE = ("status", OFFER_TRANSITIONS)

    ref = RefField(prefix="off")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    #: The short code a person reads out (``common.shortcodes``): PostgreSQL sets it on insert.
    code = models.CharField(max_length=8, blank=True, default="", editable=False)
    tenant_group = models.ForeignKey("scheduling.TenantGroup", on_delete=models.PROTECT, related_name="+")
    vacancy = models.ForeignKey(Vacancy, on_delete=models.PROTECT, related_name="offers")
    entry = models.ForeignKey(WaitlistEntry, on_delete=models.PROTECT, related_name="offers")
    patient = models.ForeignKey("scheduling.Patient", on_delete=models.PROTECT, related_name="+")
    hold = models.OneToOneField("scheduling.CapacityHold", on_delete=models.PROTECT, related_name="offer")
    status = models.CharField(max_length=10, choices=OfferStatus.choices, default=OfferStatus.OFFERED)
    version = models.PositiveIntegerField(default=1)
    expires_at = models.DateTimeField()
    policy = models.ForeignKey(WaitlistPolicy, on_delete=models.PROTECT, related_name="+")
    policy_version = models.PositiveIntegerField()
    policy_digest = models.CharField(max_length=64)
    decision_ref = models.CharField(max_length=80)
    decision_status = models.CharField(max_length=12, choices=DecisionStatus.choices)
    decision_priority_rank = models.IntegerField(default=0)
    decision_expires_at = models.DateTimeField(null=True, blank=True, help_text="empty when no decision applied")
    staff_reviewed = models.BooleanField(
        default=False, help_text="staff promoted this offer past a non-fresh decision (vacancy review)"
    )
    slot_fit = models.PositiveSmallIntegerField()
    correlation_id = models.CharField(max_length=64)
    reason_code = models.CharField(max_length=60, blank=True, default="")
    decline_reason = models.CharField(
        max_length=200, blank=True, default="", help_text="the reason given with a decline (API or claim page)"
    )
    notified_at = models.DateTimeField(
        null=True, blank=True, help_text="when the offer's notice was delivered: the answer window counts from here"
    )
    booking_requested_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="an accept that asked to book at once (ON_ACCEPT claim page): reconcile may finish it",
    )
    standing = models.BooleanField(
        default=False, help_text="made and booked at once under the patient's standing acceptance"
    )
    release_until = models.DateTimeField(
        null=True, blank=True, help_text="a standing booking may be released by the patient until then"
    )
    renews = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="renewal",
        help_text="a late accept: the patient's expired offer of this vacancy that this one takes up again",
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)
    # Not stored: annotations the claim reads in its locking statement (services/offers.py).
    latest_decision: dict | None
    has_allocation: bool

    class Meta:
        constraints = [
            # Invariant 1: at most one OFFERED/ACCEPTED offer per vacancy.
            models.UniqueConstraint(
                fields=["vacancy"],
                condition=Q(status__in=["OFFERED", "ACCEPTED"]),
                name="wl_offer_one_active_per_vacancy",
            ),
            # An entry is offered a given vacancy at most once (the cascade never comes back to it),
            # except that an offer the system or a vacancy close withdrew does not count, nor a late accept's
            # (``renews``: the patient took up their own expired offer again; at most one per offer).
            models.UniqueConstraint(
                fields=["vacancy", "entry"],
                condition=~Q(status="WITHDRAWN", reason_code__in=NON_BARRING_WITHDRAW_REASONS)
                & Q(renews__isnull=True),
                name="wl_offer_once_per_entry",
            ),
            models.UniqueConstraint(fields=["clinic", "code"], name="wl_offer_code_unique_in_clinic"),
        ]
        indexes = [
            models.Index(fields=["clinic", "patient", "created_at"], name="wl_offer_patient_week"),
            models.Index(fields=["status", "expires_at"], name="wl_offer_due"),
            models.Index(fields=["entry", "status"], name="wl_offer_entry_status"),
            # The console's offer list and the trend chart's offers per day.
            models.Index(fields=["clinic", "-created_at", "-id"], name="wl_offer_recent"),
        ]

    def __str__(self) -> str:
        return self.ref


class OfferEvent(models.Model):
    """One transition of one offer: append-only history (never updated or deleted)."""

    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    offer = models.ForeignKey(Offer, on_delete=models.PROTECT, related_name="events")
    from_status = models.CharField(max_length=10, blank=True, default="")
    to_status = models.CharField(max_length=10)
    reason_code = models.CharField(max_length=60)
    actor = models.CharField(max_length=150, help_text="username or 'system:<job>'")
    correlation_id = models.CharField(max_length=64)
    detail = models.JSONField(default=dict, blank=True, help_text="refs and codes only")
    created_at = models.DateTimeField()

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["offer", "id"], name="wl_event_offer")]

    def __str__(self) -> str:
        return f"{self.from_status}→{self.to_status} {self.reason_code}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("The offer event log is append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("The offer event log is append-only.")


class OfferClaimReceipt(models.Model):
    """The stored answer of a successful claim, returned again for a double submit."""

    ref = RefField(prefix="clr")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    offer = models.OneToOneField(Offer, on_delete=models.PROTECT, related_name="claim_receipt")
    offer_version = models.PositiveIntegerField(help_text="the offer's version after the claim")
    hold_ref = models.CharField(max_length=40)
    hold_expires_at = models.DateTimeField()
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    # Not stored: the claim sets the booked appointment's ref (or None) on the receipt it returns.
    appointment_ref: str | None

    def __str__(self) -> str:
        return self.ref


class JobRun(models.Model):
    """The last run of each waitlist beat job (readiness evidence) and its resume cursor."""

    name = models.CharField(max_length=40, unique=True)
    last_run_at = models.DateTimeField()
    last_result = models.JSONField(default=dict, help_text="counts and codes only")
    cursor = models.BigIntegerField(default=0, help_text="keyset position of the bounded scan")

    def __str__(self) -> str:
        return self.name


class VacancySkip(models.Model):
    """Staff passed over this entry for this vacancy (review resolution SKIP): the matcher never
    offers it this vacancy again, however often the vacancy is dispatched."""

    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    vacancy = models.ForeignKey(Vacancy, on_delete=models.CASCADE, related_name="skips")
    entry = models.ForeignKey(WaitlistEntry, on_delete=models.CASCADE, related_name="skips")
    actor = models.CharField(max_length=150)
    correlation_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["clinic", "vacancy", "entry"], name="wl_skip_once")]

    def __str__(self) -> str:
        return f"skip {self.entry_id} for {self.vacancy_id}"


class DispatchNote(models.Model):
    """Why dispatch passed over an entry for a vacancy, or why the vacancy waits (entry empty).

    One row per (vacancy, entry, reason), counted on repeat, so "why was this candidate next" can be
    answered from the vacancy panel without a row per reconcile tick. Refs and codes only.
    Reasons: QUIET_HOURS (vacancy-wide), CONTACT_CAP, ENTRY_LOCKED (SKIP LOCKED: another transaction
    held the entry), DECISION_STALE / DECISION_UNAVAILABLE (policy NEXT_CANDIDATE), NO_CONTACT_CONSENT
    and PATIENT_OVERLAP (named by the matcher's SQL).
    """

    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    vacancy = models.ForeignKey(Vacancy, on_delete=models.CASCADE, related_name="notes")
    # No FK constraint: the FK check would take FOR KEY SHARE on the entry row, and an ENTRY_LOCKED note
    # is written exactly while another transaction holds that row locked (SKIP LOCKED must not wait).
    entry = models.ForeignKey(
        WaitlistEntry,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="dispatch_notes",
    )
    reason_code = models.CharField(max_length=40)
    until = models.DateTimeField(null=True, blank=True, help_text="when the reason is expected to lapse")
    times = models.PositiveIntegerField(default=1)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField()
    correlation_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["vacancy", "entry", "reason_code"], name="wl_note_once", nulls_distinct=False
            )
        ]

    def __str__(self) -> str:
        return f"{self.reason_code} {self.vacancy_id}/{self.entry_id}"


from waitlist.joining.models import JoinSettings, UpkeepAsk  # noqa: E402,F401  (models live there)
from waitlist.shadow.models import ShadowObservation, ShadowPolicy, ShadowStatus  # noqa: E402,F401  (models live there)
from waitlist.standing.models import (  # noqa: E402,F401  (models live there)
    StandingAcceptance,
    StandingAcceptanceSource,
    StandingAcceptanceState,
)
from waitlist.texts.models import BookingAck, InboundText, TextMessage  # noqa: E402,F401  (models live there)
