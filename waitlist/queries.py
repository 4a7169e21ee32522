"""The waitlist's statements outside the ORM, one typed function each, with why each is raw SQL.

States come from the models' ``TextChoices`` and transition tables (``transition_sources``), formatted from the
enum (``sql_states``: fixed text, so the statement stays one prepared statement) or bound as parameters, never
typed into the text. Scheduling's rows are changed only through scheduling's own functions
(``scheduling.services.holds``, ``scheduling.queries``): no statement here holds another app's text.

- ``offer_claim_write``: the claim's offer, entry, event and receipt in one prepared statement (benchmark 3, "one
  claim alone, in process"); the ORM needs four statements, each compiled per call. The hold's step is scheduling's
  ``hold_accept_locked``, a statement of its own: ``python -m bench.hold_step_ab`` (claims alternating the old
  spliced statement and the split, 300 each, 2026-12-06 on a 2-core machine at load 15-20) measured the split at
  +0.07 and +1.7 ms a claim (median of adjacent pairs; the pairs' p25-p75 -2.8..+3.0 and -1.7..+5.5 ms: within the
  spread), so the split stays.
- ``offer_notice_delivered_write``: the offer locked, its window moved and its event, in one prepared statement
  (every offer notice's delivery: benchmark 6, the storm). Scheduling's ``hold_extend`` follows in the same
  transaction when the window grows: the same A/B measured +0.9 and +1.7 ms a delivery (4.3 -> 5.4 ms and
  4.9 -> 7.2 ms medians; the pairs' p25-p75 -1.0..+3.1 and -0.5..+5.1 ms: within the spread, but a steady shift, so
  the storm's CPU per cancellation is the figure to watch).
- ``RULES`` and their builders (``page_filters``, ``pass_reason_sql``, ``checks_sql``, ``rules_sql``,
  ``review_checks``; the bindings that fill their placeholders: ``PARAMS``, ``render``, ``vacancy_columns``,
  ``vacancy_row_binding``): hard eligibility as SQL predicates, so the matcher filters a keyset page of the
  ``wl_entry_match`` index in PostgreSQL (benchmark 1: O(log n + page) at 100,000 entries) and the console judges
  many vacancies in one query; ``tests/waitlist/test_eligibility_parity.py`` checks them against the Python rule.
- ``matcher_page`` (its text: ``page_sql``, ``first_pages_sql``), ``entry_checks``: the matcher's keyset pages
  (prepared: planning cost more than running, benchmark 1), with the stored decisions of a gated dispatch's
  candidates read in the same statement (one statement less per dispatch), and one entry's rule outcomes.
- ``entry_lock_first_free``, ``offer_write``: promotion's entry lock (``SKIP LOCKED`` over a run, with its rule
  outcomes, standing notice, unanswered streak and contact-cap sends) and the new offer's five writes, one prepared
  statement each (benchmark 2, dispatch; the storm); ``entry_rechecks``: the same columns read again after a wait
  for the entry's lock (staff review, a late accept: the CHECKS array and the streak subquery are raw SQL, and one
  statement replaces the one-entry checks, the recent sends and the streak read one by one);
  ``unanswered_count``: the streak on its own.
- ``vacancy_claim_next``: the dispatcher loop's ``SKIP LOCKED`` claim with the previous claim's release, prepared
  (benchmark 2, 32 dispatchers).
- ``dispatch_note_upsert``, ``dispatch_notes_entry_locked``: ``INSERT … ON CONFLICT DO UPDATE`` counting a note
  again (racing dispatchers; the ORM has no upsert that increments).
- ``decisions_newest``, ``decisions_newest_per_pair_sql``: ``DISTINCT ON`` reads of the newest decision, prepared
  for the matcher (benchmark 1), one ordered pass for the every-clinic scrape (benchmark 7).
- Figures (``fill_metrics_counts``, ``decision_freshness_groups``, ``trend_days``, ``fairness_over_time_days``,
  ``fairness_wait_reduction``, ``fairness_passovers``, ``fairness_forgotten``): ``percentile_cont`` and ``ntile``,
  which the ORM has no aggregate for, and the pass-over count's planned join order; one statement each whatever
  the waitlist's size (benchmark 5, the console). The fill-over-time counts, which need neither, are the ORM's
  (``figures.over_time.fill_over_time``: the same grouped scan, the days filled in Python).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from psycopg.types.json import Jsonb

from common.cas import sql_states, transition_sources
from common.fastpath import prepared_cursor
from scheduling.models import ConsentState, Patient
from waitlist.joining.availability import AFTERNOON_FROM, EVENING_FROM, PARTS
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    DISPATCHABLE_VACANCY_STATUSES,
    OPEN_ENTRY_STATUSES,
    EntryStatus,
    Offer,
    OfferClaimReceipt,
    OfferStatus,
    StandingAcceptanceState,
    Vacancy,
    VacancyStatus,
    WaitlistEntry,
)

# --- offers: the claim and a notice's delivery -------------------------------------------------------------------

def _claim_sql() -> str:
    offer_from = sql_states(transition_sources(Offer, OfferStatus.ACCEPTED, OfferStatus.OFFERED))
    entry_from = sql_states(transition_sources(WaitlistEntry, EntryStatus.ACCEPTED, EntryStatus.OFFERED))
    return f"""
WITH o AS (
    UPDATE waitlist_offer SET status = {sql_states(OfferStatus.ACCEPTED)}, version = version + 1,
        booking_requested_at = %(booking)s
    WHERE id = %(offer)s AND status IN ({offer_from}) AND version = %(offer_version)s
    RETURNING id),
e AS (
    UPDATE waitlist_waitlistentry SET status = {sql_states(EntryStatus.ACCEPTED)}, version = version + 1
    WHERE id = %(entry)s AND status IN ({entry_from}) AND version = %(entry_version)s AND EXISTS (SELECT 1 FROM o)
    RETURNING id),
ev AS (
    INSERT INTO waitlist_offerevent
        (clinic_id, offer_id, from_status, to_status, reason_code, actor, correlation_id, detail, created_at)
    SELECT %(clinic)s, %(offer)s, {sql_states(OfferStatus.OFFERED)}, {sql_states(OfferStatus.ACCEPTED)}, 'CLAIMED',
           %(actor)s, %(correlation)s, %(detail)s, %(now)s
    FROM e
    RETURNING id)
INSERT INTO waitlist_offerclaimreceipt
    (ref, clinic_id, offer_id, offer_version, hold_ref, hold_expires_at, idempotency_key, body, created_at)
SELECT %(receipt)s, %(clinic)s, %(offer)s, %(new_version)s, %(hold_ref)s, %(receipt_expires)s, %(key)s, %(body)s,
       %(created)s
FROM e, ev
RETURNING id
"""


_CLAIM_SQL = _claim_sql()


def offer_claim_write(
    *, offer: Offer, entry: WaitlistEntry, receipt: OfferClaimReceipt, booking_requested_at: datetime | None,
    actor: str, correlation_id: str, detail: dict, now: datetime,
) -> int | None:
    """The claim's waitlist writes: offer and entry OFFERED → ACCEPTED at the versions they were locked at, the
    CLAIMED event and the claim receipt, each step only if the one before it changed its row (``cas_update``'s
    compare-and-set, chained). Returns the receipt's id, None when a step missed (nothing of the later steps
    written)."""
    params = {
        "booking": booking_requested_at, "offer": offer.pk, "offer_version": offer.version,
        "entry": entry.pk, "entry_version": entry.version, "clinic": offer.clinic_id, "actor": actor,
        "correlation": correlation_id, "detail": Jsonb(detail), "now": now,
        "receipt": receipt.ref, "receipt_expires": receipt.hold_expires_at, "new_version": receipt.offer_version,
        "hold_ref": receipt.hold_ref, "key": receipt.idempotency_key, "body": Jsonb(receipt.body),
        "created": receipt.created_at,
    }
    with prepared_cursor(connection) as cursor:
        cursor.execute(_CLAIM_SQL, params)
        row = cursor.fetchone()
    return row[0] if row is not None else None


def _notice_delivered_sql() -> str:
    offered = sql_states(OfferStatus.OFFERED)
    return f"""
WITH locked AS (
    SELECT id, expires_at AS was, created_at, correlation_id FROM waitlist_offer
    WHERE id = %(offer)s AND clinic_id = %(clinic)s AND status IN ({offered}) AND notified_at IS NULL
    FOR NO KEY UPDATE),
o AS (
    UPDATE waitlist_offer SET notified_at = %(at)s, expires_at = GREATEST(locked.was, %(deadline)s),
        version = waitlist_offer.version + 1, updated_at = %(now)s
    FROM locked WHERE waitlist_offer.id = locked.id
    RETURNING waitlist_offer.expires_at, waitlist_offer.version, locked.was, locked.created_at,
        locked.correlation_id),
ev AS (
    INSERT INTO waitlist_offerevent
        (clinic_id, offer_id, from_status, to_status, reason_code, actor, correlation_id, detail, created_at)
    SELECT %(clinic)s, %(offer)s, {offered}, {offered}, 'NOTICE_DELIVERED', 'system:notify',
        COALESCE(NULLIF(%(correlation)s, ''), o.correlation_id),
        jsonb_build_object('late_seconds', GREATEST(0, floor(extract(epoch FROM %(at)s - o.created_at)))::int,
                           'expires_at', o.expires_at, 'extended', o.expires_at > o.was),
        %(at)s
    FROM o)
SELECT o.expires_at, o.version, o.correlation_id, o.was FROM o
"""


_NOTICE_DELIVERED_SQL = _notice_delivered_sql()


@dataclass(frozen=True)
class NoticeDelivered:
    """What ``offer_notice_delivered_write`` wrote: the offer's new expiry and version, its correlation id, and
    the expiry it had (``was``: the hold must grow when the new one is later)."""

    expires_at: datetime
    version: int
    correlation_id: str
    was: datetime


def offer_notice_delivered_write(
    *, offer_id: int, clinic_id: int, delivered_at: datetime, deadline: datetime, now: datetime, correlation_id: str,
) -> NoticeDelivered | None:
    """The offer, locked and only while OFFERED and not yet notified: notified at ``delivered_at``, expiring at the
    later of ``deadline`` and its expiry, with its NOTICE_DELIVERED event (detail: late_seconds, expires_at,
    extended). None when the offer was not OFFERED or already notified (nothing written)."""
    params = {"offer": offer_id, "clinic": clinic_id, "at": delivered_at, "deadline": deadline, "now": now,
              "correlation": correlation_id}
    with prepared_cursor(connection) as cursor:
        cursor.execute(_NOTICE_DELIVERED_SQL, params)
        row = cursor.fetchone()
    return NoticeDelivered(*row) if row is not None else None


# --- hard eligibility (``waitlist.rules.eligibility`` re-exports these: the one definition) -----------------------

@dataclass(frozen=True)
class Rule:
    code: str  # why an entry is not eligible (``matcher.ineligibility``, 409 CANDIDATE_INELIGIBLE)
    check: str  # the passed check's name in the console's evidence
    sql: str  # true when the entry passes; NULL counts as failed
    #: Not filtered out of the page but named in its ``pass_reason``, so the candidate is recorded as passed over.
    passed_over: bool = False
    #: The page expresses it by its slot_fit tiers (one ``practitioner_key`` equality per tier) instead.
    by_tier: bool = False


def _morning(instant: str) -> str:
    """Whether ``instant`` falls before noon in the clinic's time zone: the part of the day a decline is about."""
    return f"(date_part('hour', {instant} AT TIME ZONE {{tz}}) < 12)"


def _slot_bit_sql(starts_at: str, tz: str) -> str:
    """``availability.slot_bit`` in SQL for a start instant and a zone (both SQL expressions): the same
    arithmetic, held to it by the parity test."""
    local = f"({starts_at} AT TIME ZONE {tz})"
    return (f"(1 << ((extract(isodow FROM {local})::int - 1) * {len(PARTS)}"
            f" + CASE WHEN extract(hour FROM {local}) < {AFTERNOON_FROM} THEN 0"
            f" WHEN extract(hour FROM {local}) < {EVENING_FROM} THEN 1 ELSE 2 END))")


RULES: tuple[Rule, ...] = (
    # The status literal (formatted from the enum) matches the partial index's predicate (``wl_entry_match``).
    Rule("ENTRY_NOT_WAITING", "WAITING", f"e.status = {sql_states(EntryStatus.WAITING)}"),
    Rule("SCOPE", "SCOPE", "e.clinic_id = {clinic} AND e.tenant_group_id = {tenant}"),
    Rule("TREATMENT", "TREATMENT", "e.treatment_id = {treatment}"),
    # The vacancy's practitioner by name (slot_fit 1) or any practitioner (practitioner_key 0, slot_fit 0).
    Rule("PRACTITIONER", "PRACTITIONER", "e.practitioner_key IN ({practitioner}, 0)", by_tier=True),
    Rule("WINDOW", "WINDOW", "e.earliest <= {starts_at} AND e.latest >= {ends_at}"),
    # When the patient can come (``joining.availability``): the slot's day and part of the day, clinic-local.
    Rule("UNAVAILABLE", "AVAILABLE", "(e.availability & " + _slot_bit_sql("{starts_at}", "{tz}") + ") <> 0"),
    Rule("PAUSED", "NOT_PAUSED", "(e.paused_until IS NULL OR e.paused_until <= {now})"),
    Rule("RESOURCE", "RESOURCE", "(e.resource_kind = '' OR e.resource_kind = {resource_kind})"),
    Rule("CANCELLING_PATIENT", "NOT_CANCELLING_PATIENT", "e.patient_id IS DISTINCT FROM {excluded_patient}"),
    # A decline holds back, until ``suppressed_until``, every offer (no ``suppressed_like_start``) or only offers
    # like the declined one: its practitioner and its part of the day (before or after noon, clinic time).
    Rule(
        "SUPPRESSED",
        "NOT_SUPPRESSED",
        f"""(e.suppressed_until IS NULL OR e.suppressed_until <= {{now}}
      OR (e.suppressed_like_start IS NOT NULL AND (e.suppressed_practitioner_id IS DISTINCT FROM {{practitioner}}
          OR {_morning("e.suppressed_like_start")} <> {_morning("{starts_at}")})))""",
    ),
    Rule(
        "ALREADY_OFFERED",
        "NOT_OFFERED_BEFORE",
        f"""NOT EXISTS (
      SELECT 1 FROM waitlist_offer o WHERE o.vacancy_id = {{vacancy}} AND o.entry_id = e.id
        AND NOT (o.status = {sql_states(OfferStatus.WITHDRAWN)} AND o.reason_code = ANY({{non_barring}})))""",
    ),
    Rule(
        "SKIPPED_BY_STAFF",
        "NOT_SKIPPED_BY_STAFF",
        """NOT EXISTS (
      SELECT 1 FROM waitlist_vacancyskip k
      WHERE k.clinic_id = e.clinic_id AND k.vacancy_id = {vacancy} AND k.entry_id = e.id)""",
    ),
    Rule(
        "NO_CONTACT_CONSENT",
        "CONTACT_CONSENT",
        # The newest consent row of a channel the clinic's provider uses is GRANTED.
        f"""EXISTS (
        SELECT 1 FROM scheduling_contactconsent c
        WHERE c.patient_id = e.patient_id AND c.channel = ANY({{channels}})
          AND c.state = {sql_states(ConsentState.GRANTED)}
          AND c.id = (SELECT max(n.id) FROM scheduling_contactconsent n
                      WHERE n.patient_id = c.patient_id AND n.channel = c.channel))""",
        passed_over=True,
    ),
    Rule(
        "PATIENT_OVERLAP",
        "NO_PATIENT_OVERLAP",
        # The patient's own holds and HELD/CONFIRMED appointments (the exclusion constraint's index).
        """NOT EXISTS (
        SELECT 1 FROM scheduling_capacityallocation a
        WHERE a.patient_id = e.patient_id AND a.active AND a.period && tstzrange({starts_at}, {ends_at}, '[)'))""",
        passed_over=True,
    ),
    # Offers the patient did not ask for in the last 7 days, counted from their last accept (an accept says
    # they want these offers); a standing-acceptance booking was asked for and does not count.
    Rule(
        "WEEKLY_CAP",
        "UNDER_WEEKLY_CAP",
        f"""({{cap}}::integer IS NULL OR (
      SELECT count(*) FROM waitlist_offer w
      WHERE w.clinic_id = e.clinic_id AND w.patient_id = e.patient_id AND w.created_at > {{week_ago}}
        AND NOT w.standing
        AND NOT EXISTS (SELECT 1 FROM waitlist_offer a WHERE a.clinic_id = w.clinic_id
          AND a.patient_id = w.patient_id AND a.status = {sql_states(OfferStatus.ACCEPTED)} AND a.id >= w.id)
  ) < {{cap}}::integer)""",
    ),
)

_PLACEHOLDER = re.compile(r"\{(\w+)\}")

#: Placeholder -> (SQL, params). ``PARAMS`` binds each to the named query parameter of the same name.
Binding = Callable[[str], tuple[str, list]]


def PARAMS(name: str) -> tuple[str, list]:  # noqa: N802 - a constant-like binding
    return f"%({name})s", []


def render(sql: str, binding: Binding) -> tuple[str, list]:
    """``sql`` with each placeholder replaced by its binding; positional params in order of appearance."""
    params: list = []

    def replace(match: re.Match) -> str:
        fragment, values = binding(match.group(1))
        params.extend(values)
        return fragment

    return _PLACEHOLDER.sub(replace, sql), params


def page_filters(tier_sql: str) -> str:
    """The page's WHERE clause: every filtering rule as written (so the partial index and its range
    conditions stay visible to the planner), the practitioner rule replaced by the tier's equality."""
    parts = [tier_sql if rule.by_tier else rule.sql for rule in RULES if not rule.passed_over]
    return "\n  AND ".join(parts)


def pass_reason_sql() -> str:
    """The page's ``pass_reason`` column: the first passed-over rule the row fails, else NULL."""
    whens = "\n    ".join(
        f"WHEN NOT COALESCE(({rule.sql}), false) THEN '{rule.code}'" for rule in RULES if rule.passed_over
    )
    return f"CASE\n    {whens}\n  END"


def checks_sql(binding: Binding = PARAMS) -> tuple[str, list]:
    """Every rule's outcome for the entry ``e`` as one ``boolean[]`` in ``RULES`` order (NULL is false)."""
    items = ",\n    ".join(f"COALESCE(({rule.sql}), false)" for rule in RULES)
    return render(f"ARRAY[\n    {items}]", binding)


def vacancy_columns(alias: str) -> dict[str, str]:
    """The placeholders that are plain columns of a vacancy row ``alias``, as SQL."""
    return {
        "clinic": f"{alias}.clinic_id",
        "tenant": f"{alias}.tenant_group_id",
        "treatment": f"{alias}.treatment_id",
        "practitioner": f"{alias}.practitioner_id",
        "starts_at": f"{alias}.starts_at",
        "ends_at": f"{alias}.ends_at",
        "excluded_patient": f"{alias}.excluded_patient_id",
        "vacancy": f"{alias}.id",
    }


def rules_sql(codes: tuple[str, ...], binding: Binding) -> tuple[str, list]:
    """The rules named by ``codes`` (in ``RULES`` order) as one conjunction: a reader that needs only some of them
    (the fairness reads: whether an entry fits a slot on its stored facts)."""
    unknown = set(codes) - {rule.code for rule in RULES}
    if unknown:
        raise KeyError(f"no such rule: {sorted(unknown)}")
    return render("\n    AND ".join(f"({rule.sql})" for rule in RULES if rule.code in codes), binding)


def vacancy_row_binding(*, now, week_ago, channels: list[str], non_barring: list[str]) -> Binding:
    """Bind the vacancy's facts to the columns of the outer ``waitlist_vacancy`` row (the console's review
    evidence: many vacancies in one query); the weekly cap is the clinic's current policy version's."""
    columns = {
        **vacancy_columns("waitlist_vacancy"),
        "resource_kind": "(SELECT r.kind FROM scheduling_resource r WHERE r.id = waitlist_vacancy.resource_id)",
        "tz": "(SELECT c.timezone FROM scheduling_clinic c WHERE c.id = waitlist_vacancy.clinic_id)",
        "cap": "(SELECT p.weekly_offer_cap FROM waitlist_waitlistpolicy p"
        " WHERE p.clinic_id = waitlist_vacancy.clinic_id ORDER BY p.version DESC LIMIT 1)",
    }
    values = {"now": now, "week_ago": week_ago, "channels": channels, "non_barring": non_barring}

    def binding(name: str) -> tuple[str, list]:
        return (columns[name], []) if name in columns else ("%s", [values[name]])

    return binding


def review_checks(binding: Binding) -> RawSQL:
    """An annotation for a ``Vacancy`` queryset: every rule's outcome for its review entry (``boolean[]``)."""
    checks, params = checks_sql(binding)
    return RawSQL(f"SELECT {checks} FROM waitlist_waitlistentry e WHERE e.id = waitlist_vacancy.review_entry_id",
                  params, output_field=ArrayField(BooleanField()))


# --- the matcher ------------------------------------------------------------------------------------------------

# Hard eligibility comes from ``RULES`` (the one definition): the filtering rules are the WHERE clause; two rules
# are not filtered but named (``pass_reason``), so a passed-over candidate is recorded with its reason rather than
# silently missing: no consent for the clinic's channel, and a time overlapping the patient's own bookings.
PAGE_SQL = """
SELECT e.id, e.ref, e.patient_id, e.version, e.priority_rank, e.waiting_since, e.priority_key,
  {pass_reason} AS pass_reason
FROM (
  SELECT e.id, e.ref, e.patient_id, e.version, e.priority_rank, e.waiting_since, e.priority_key, e.clinic_id
  FROM waitlist_waitlistentry e
  WHERE {filters}
    AND (e.priority_key, e.waiting_since, e.id) > ({{after_key}}, {{after_since}}, {{after_id}})
  ORDER BY e.priority_key, e.waiting_since, e.id
  LIMIT {{limit}}
) e
ORDER BY e.priority_key, e.waiting_since, e.id
"""

#: (slot_fit, the tier's practitioner equality).
TIERS = ((1, "e.practitioner_key = {practitioner}"), (0, "e.practitioner_key = 0"))
_PAGES = {
    slot_fit: render(PAGE_SQL.format(pass_reason=pass_reason_sql(), filters=page_filters(tier)), PARAMS)[0]
    for slot_fit, tier in TIERS
}
# The first page of both tiers in one statement (a vacancy's named tier is often short or empty): each branch
# is that tier's own page query, unchanged; the rows say which tier they are.
FIRST_PAGES_SQL = "\nUNION ALL\n".join(
    f"SELECT {slot_fit} AS slot_fit, p.* FROM ({_PAGES[slot_fit]}) p" for slot_fit, _ in TIERS
)
CHECKS_COLUMN = checks_sql(PARAMS)[0]

#: "Newest" decision first: the last received, ties the last inserted (``feed.StoredDecisionProvider.NEWEST``).
_NEWEST_FIRST = "d.received_at DESC, d.id DESC"

# The same pages with each row's newest stored decision (``decisions_newest``' order, one ``wl_decision_latest`` probe
# a row): a gated dispatch reads its candidates' decisions with them instead of in a statement of its own. The
# columns follow the page's: decision_ref, status, priority_rank, expires_at (NULL: none).
_WITH_DECISION = """
SELECT p.*, d.decision_ref, d.status, d.priority_rank, d.expires_at FROM ({page}) p
LEFT JOIN LATERAL (
  SELECT d.decision_ref, d.status, d.priority_rank, d.expires_at FROM waitlist_bookingreliabilitydecision d
  WHERE d.clinic_id = %(clinic)s AND d.patient_id = p.patient_id
  ORDER BY {newest} LIMIT 1
) d ON true
"""
_PAGES_WITH_DECISIONS = {
    slot_fit: _WITH_DECISION.format(page=page, newest=_NEWEST_FIRST) + "ORDER BY p.priority_key, p.waiting_since, p.id"
    for slot_fit, page in _PAGES.items()
}
FIRST_PAGES_WITH_DECISIONS_SQL = _WITH_DECISION.format(page=FIRST_PAGES_SQL, newest=_NEWEST_FIRST)


def page_sql(slot_fit: int, *, decisions: bool = False) -> str:
    """One tier's page statement (its parameters are ``matcher.page_params``'); ``decisions``: with each row's
    newest stored decision."""
    return _PAGES_WITH_DECISIONS[slot_fit] if decisions else _PAGES[slot_fit]


def first_pages_sql(*, decisions: bool = False) -> str:
    """Both tiers' first pages in one statement, each row led by its slot_fit; ``decisions``: as ``page_sql``."""
    return FIRST_PAGES_WITH_DECISIONS_SQL if decisions else FIRST_PAGES_SQL


def matcher_page(params: dict, *, first: bool, slot_fit: int, decisions: bool = False) -> list[tuple]:
    """A matcher page (``first``: both tiers' first pages, each row led by its slot_fit; ``decisions``: each row
    followed by its newest stored decision's four columns). Fixed text, prepared once per connection: planning it
    cost more than running it (issue 15); its generic plan is the index-ordered scan (tests/waitlist/test_matcher.py
    checks it)."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(first_pages_sql(decisions=decisions) if first else page_sql(slot_fit, decisions=decisions),
                       params)
        return cursor.fetchall()


def entry_checks(entry_id: int, params: dict) -> list[bool] | None:
    """Every rule's outcome for one entry as stored (``params``: ``matcher.page_params``'), None when it is gone."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {CHECKS_COLUMN} FROM waitlist_waitlistentry e WHERE e.id = %(entry)s",
                       {**params, "entry": entry_id})
        row = cursor.fetchone()
    return row[0] if row else None


# --- promotion: the entry lock and the offer's writes --------------------------------------------------------------

# The entry's last ``limit`` answered-or-unanswered offers (standing bookings asked nothing; withdrawn ones were
# taken back before the patient had their say), newest first: their count when every one is an unanswered window
# expiry, else 0. (``entry``, ``before``, ``limit``: SQL expressions): the entry lock of promotion reads it in its
# own statement, ``unanswered_count`` on its own.
_UNANSWERED_STREAK_SQL = f"""(
    SELECT CASE WHEN count(*) = count(*) FILTER (
                    WHERE r.status = {sql_states(OfferStatus.EXPIRED)} AND r.reason_code = 'EXPIRED')
                THEN count(*) ELSE 0 END
    FROM (
        SELECT o.status, o.reason_code FROM waitlist_offer o
        WHERE o.entry_id = {{entry}} AND NOT o.standing AND o.id < {{before}}
          AND o.status IN ({sql_states((OfferStatus.DECLINED, OfferStatus.EXPIRED, OfferStatus.ACCEPTED))})
        ORDER BY o.id DESC
        LIMIT {{limit}}
    ) r
)"""


def unanswered_count(entry_id: int, limit: int, before_offer_id: int) -> int:
    """Up to ``limit`` of the entry's latest offers before ``before_offer_id`` unanswered in a row."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + _UNANSWERED_STREAK_SQL.format(entry="%s", before="%s", limit="%s"),
                       [entry_id, before_offer_id, limit])
        return cursor.fetchone()[0]


#: The newest standing-acceptance row of the entry ``e``, as the minimum notice when GRANTED (else NULL): a
#: column of promotion's entry-locking statement, so dispatch reads it with the lock in no extra statement.
_STANDING_NOTICE_SQL = (
    f"(SELECT CASE WHEN s.state = {sql_states(StandingAcceptanceState.GRANTED)} THEN s.min_notice_minutes END"
    " FROM waitlist_standingacceptance s WHERE s.entry_id = e.id ORDER BY s.id DESC LIMIT 1)"
)

# The entry's columns as stored (every concrete field), then its patient's columns the offer's notice needs.
ENTRY_FIELDS = list(WaitlistEntry._meta.concrete_fields)
# (In the model's field order: ``from_db`` fills a partial row in that order.)
PATIENT_FIELDS = tuple(f.attname for f in Patient._meta.concrete_fields
                       if f.attname in ("id", "ref", "language", "phone", "email"))

# The first entry of the run (in the run's order) still WAITING at the version it was read at that this
# transaction can lock now (SKIP LOCKED: another dispatcher holds it; or, with ``wait``, its lock waited for),
# then, over the locked row only (the CTE is materialized: computed after the lock, never for the rows
# passed over): its patient, and every hard-eligibility rule (``checks_sql``) when asked.
_LOCK_FIRST_FREE_SQL = """
WITH locked AS MATERIALIZED (
    SELECT e.*, r.pos
    FROM unnest(%(ids)s::bigint[], %(versions)s::bigint[]) WITH ORDINALITY AS r(id, version, pos)
    JOIN waitlist_waitlistentry e ON e.id = r.id AND e.version = r.version
    WHERE e.status IN ({waiting})
    ORDER BY r.pos
    LIMIT 1
    FOR NO KEY UPDATE OF e{skip}
)
SELECT {entry}, e.pos, {standing}, {unanswered}, {patient}, {sends}, {checks}
FROM locked e JOIN scheduling_patient p ON p.id = e.patient_id
"""


def _lock_first_free_sql(*, wait: bool, checks: bool) -> str:
    return _LOCK_FIRST_FREE_SQL.format(
        skip="" if wait else " SKIP LOCKED",
        waiting=sql_states(transition_sources(WaitlistEntry, EntryStatus.OFFERED, EntryStatus.WAITING)),
        entry=", ".join(f"e.{f.column}" for f in ENTRY_FIELDS),
        standing=_STANDING_NOTICE_SQL,
        unanswered=_UNANSWERED_STREAK_SQL.format(entry="e.id", before="%(unanswered_before)s",
                                                 limit="%(unanswered_limit)s"),
        patient=", ".join(f"p.{name}" for name in PATIENT_FIELDS),
        checks=CHECKS_COLUMN if checks else "NULL",
        sends="cw_recent_sends(p.ref, %(cap_since)s, %(cap_limit)s)" if checks else "NULL",
    )


_LOCK_SQL = {(wait, checks): _lock_first_free_sql(wait=wait, checks=checks)
             for wait in (False, True) for checks in (False, True)}


def entry_lock_first_free(params: dict, *, wait: bool, checks: bool) -> tuple | None:
    """The row of the first free entry of ``params["ids"]`` (at ``params["versions"]``), locked: its columns
    (``ENTRY_FIELDS``), its position, its standing minimum notice, its unanswered streak, its patient's columns
    (``PATIENT_FIELDS``), and with ``checks`` its patient's recent sends and every rule's outcome. None: none free.
    One prepared statement however many racing dispatchers hold the head of the queue (benchmark 2)."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(_LOCK_SQL[(wait, checks)], params)
        return cursor.fetchone()


# After a wait for the entry's lock, what the lock statement reads with the lock (its rule outcomes, its patient's
# recent sends, its unanswered streak), read again in a snapshot taken after the lock.
_RECHECKS_SQL = f"""
SELECT {CHECKS_COLUMN}, cw_recent_sends(p.ref, %(cap_since)s, %(cap_limit)s),
       {_UNANSWERED_STREAK_SQL.format(entry="e.id", before="%(unanswered_before)s", limit="%(unanswered_limit)s")}
FROM waitlist_waitlistentry e JOIN scheduling_patient p ON p.id = e.patient_id
WHERE e.id = %(entry)s
"""


def entry_rechecks(entry_id: int, params: dict) -> tuple[list[bool], list[datetime], int]:
    """One locked entry's rule outcomes, its patient's recent sends and its unanswered streak (``params``: the lock
    statement's), read after a wait for its lock: the columns ``entry_lock_first_free`` reads with the lock when it
    does not wait."""
    with connection.cursor() as cursor:
        cursor.execute(_RECHECKS_SQL, {**params, "entry": entry_id})
        checks, sent, unanswered = cursor.fetchone()
    return checks, list(sent), unanswered


# A new offer's writes, in one statement: the entry's and the vacancy's compare-and-set (sources from the state
# tables; the entry at the version it was matched at, the vacancy at the version locked: a vacancy under the fence is
# OPEN or REVIEW, and its version pins which), the offer, its creation event and its notice in the outbox. A CAS that
# changes no row rolls the whole statement back (its caller's transaction raises the typed conflict), exactly as if
# each had been written alone.
#: The states the offer's write moves the entry and the vacancy from (``offer_write``).
OFFER_WRITE_ENTRY_FROM = transition_sources(WaitlistEntry, EntryStatus.OFFERED, EntryStatus.WAITING)
OFFER_WRITE_VACANCY_FROM = transition_sources(Vacancy, VacancyStatus.OPEN, DISPATCHABLE_VACANCY_STATUSES)
_OFFER_WRITE_SQL = f"""
WITH entry AS (
    UPDATE waitlist_waitlistentry SET version = version + 1, status = {sql_states(EntryStatus.OFFERED)}
    WHERE id = %s AND version = %s AND status IN ({sql_states(OFFER_WRITE_ENTRY_FROM)}) RETURNING id
), vacancy AS (
    UPDATE waitlist_vacancy SET version = version + 1, status = {sql_states(VacancyStatus.OPEN)},
        review_entry_id = NULL, waiting_reason = '', waiting_until = NULL, late_yes_offer_id = NULL
    WHERE id = %s AND version = %s AND status IN ({sql_states(OFFER_WRITE_VACANCY_FROM)}) RETURNING id
), offer AS (
    {{offer}} RETURNING id
), event AS (
    INSERT INTO waitlist_offerevent
        (clinic_id, offer_id, from_status, to_status, reason_code, actor, correlation_id, detail, created_at)
    SELECT %s, offer.id, %s, %s, %s, %s, %s, %s, %s FROM offer
), notice AS (
    {{notice}}
)
SELECT (SELECT id FROM offer), (SELECT count(*) FROM entry), (SELECT count(*) FROM vacancy)
"""


def offer_write(
    *, entry: tuple[int, int], vacancy: tuple[int, int], offer_insert: tuple[str, list], event: list,
    notice_insert: tuple[str, list] | None,
) -> tuple[int, int, int]:
    """A new offer's writes in one prepared statement (benchmark 2, dispatch): ``entry`` WAITING → OFFERED and
    ``vacancy`` to OPEN as (id, expected version), the offer's and the notice's ORM INSERTs (``insert_sql``; no
    notice: a standing booking's), ``event`` the MATCHED event's values (clinic, from, to, reason, actor,
    correlation, detail, at). Returns (offer id, entries changed, vacancies changed)."""
    offer_sql, offer_params = offer_insert
    notice_sql, notice_params = notice_insert if notice_insert is not None else ("SELECT 1", [])
    params = [*entry, *vacancy, *offer_params, *event, *notice_params]
    with prepared_cursor(connection) as cursor:
        cursor.execute(_OFFER_WRITE_SQL.format(offer=offer_sql, notice=notice_sql), params)
        return cursor.fetchone()


# --- the dispatcher loop's vacancy claim ---------------------------------------------------------------------------

# The next vacancy of this loop's list (in the list's order) that is dispatchable, has no active offer and no
# live claim of another loop, returned whole (the loop dispatches it without reading it again). SKIP LOCKED
# passes over rows another transaction holds right now (a racing claim, a promotion under the fence) instead
# of queueing behind them. The same statement releases this loop's previous claim (``released``: a row
# before ``after``, never the one claimed).
_VACANCY_CLAIM_SQL = f"""
WITH released AS (
    UPDATE waitlist_vacancy SET dispatch_claimed_until = NULL
    WHERE id = %(release)s AND dispatch_claimed_until = %(until)s
)
UPDATE waitlist_vacancy SET dispatch_claimed_until = %(until)s
FROM (
    SELECT v.id, c.pos FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS c(id, pos)
    JOIN waitlist_vacancy v ON v.id = c.id
    WHERE c.pos > %(after)s
      AND v.status IN ({sql_states(DISPATCHABLE_VACANCY_STATUSES)})
      AND (v.dispatch_claimed_until IS NULL OR v.dispatch_claimed_until <= %(now)s)
      AND NOT EXISTS (SELECT 1 FROM waitlist_offer o
                      WHERE o.vacancy_id = v.id AND o.status IN ({sql_states(ACTIVE_OFFER_STATUSES)}))
    ORDER BY c.pos
    LIMIT 1
    FOR NO KEY UPDATE OF v SKIP LOCKED) AS claimed
WHERE waitlist_vacancy.id = claimed.id
RETURNING claimed.pos, {{columns}}
"""

VACANCY_FIELDS = list(Vacancy._meta.concrete_fields)
_VACANCY_CLAIM = _VACANCY_CLAIM_SQL.format(columns=", ".join(f"waitlist_vacancy.{f.column}" for f in VACANCY_FIELDS))


def vacancy_claim_next(vacancy_ids: list[int], *, after: int, now: datetime, until: datetime,
                       release: int | None) -> tuple | None:
    """The claimed vacancy's row (its position in ``vacancy_ids``, then ``VACANCY_FIELDS``), or None; ``release``:
    the loop's previous claim, released by the same statement. One prepared statement per vacancy of the loop
    (benchmark 2, dispatch; the storm)."""
    params: dict[str, Any] = {"after": after, "ids": vacancy_ids, "now": now, "until": until, "release": release}
    with prepared_cursor(connection) as cursor:
        # Under READ COMMITTED a row claimed and committed by a racer between this statement's snapshot and
        # its lock is re-checked and dropped, and LIMIT 1 then answers nothing: ask again before giving up.
        for _attempt in range(3):
            cursor.execute(_VACANCY_CLAIM, params)
            row = cursor.fetchone()
            if row is not None:
                return row
            params["release"] = None
    return None


# --- dispatch notes ------------------------------------------------------------------------------------------------

_NOTE_SQL = """
INSERT INTO waitlist_dispatchnote
    (clinic_id, vacancy_id, entry_id, reason_code, until, times, first_at, last_at, correlation_id)
VALUES (%(clinic)s, %(vacancy)s, %(entry)s, %(reason)s, %(until)s, 1, %(now)s, %(now)s, %(correlation)s)
ON CONFLICT ON CONSTRAINT wl_note_once DO UPDATE
SET times = waitlist_dispatchnote.times + 1, until = EXCLUDED.until, last_at = EXCLUDED.last_at,
    correlation_id = EXCLUDED.correlation_id
"""


def dispatch_note_upsert(*, clinic_id: int, vacancy_id: int, entry_id: int | None, reason_code: str,
                         until: datetime | None, now: datetime, correlation_id: str) -> None:
    """Record a note, or count it again (``ON CONFLICT … DO UPDATE``: racing dispatchers note the same pass-over;
    the ORM's ``update_or_create`` would race or lock)."""
    with connection.cursor() as cursor:
        cursor.execute(_NOTE_SQL, {"clinic": clinic_id, "vacancy": vacancy_id, "entry": entry_id,
                                   "reason": reason_code, "until": until, "now": now, "correlation": correlation_id})


# The held ones only: an entry a racer has already taken (no longer WAITING at the version read) is not noted.
_LOCKED_NOTES_SQL = f"""
INSERT INTO waitlist_dispatchnote
    (clinic_id, vacancy_id, entry_id, reason_code, until, times, first_at, last_at, correlation_id)
SELECT %(clinic)s, %(vacancy)s, e.id, 'ENTRY_LOCKED', NULL, 1, %(now)s, %(now)s, %(correlation)s
FROM waitlist_waitlistentry e
WHERE (e.id, e.version) IN (SELECT * FROM unnest(%(ids)s::bigint[], %(versions)s::bigint[]))
  AND e.status IN ({sql_states(EntryStatus.WAITING)})
ON CONFLICT ON CONSTRAINT wl_note_once DO UPDATE
SET times = waitlist_dispatchnote.times + 1, until = EXCLUDED.until, last_at = EXCLUDED.last_at,
    correlation_id = EXCLUDED.correlation_id
"""


def dispatch_notes_entry_locked(*, clinic_id: int, vacancy_id: int, entries: list[tuple[int, int]], now: datetime,
                                correlation_id: str) -> None:
    """``ENTRY_LOCKED`` notes for the still-WAITING ones of ``entries`` ((id, version)), in one upsert: racing
    dispatchers pass over many at once."""
    params: dict[str, Any] = {"clinic": clinic_id, "vacancy": vacancy_id, "ids": [e for e, _v in entries],
                              "versions": [v for _e, v in entries], "now": now, "correlation": correlation_id}
    with connection.cursor() as cursor:
        cursor.execute(_LOCKED_NOTES_SQL, params)


# --- booking-reliability decisions ---------------------------------------------------------------------------------

#: "Newest": the last received, ties the last inserted (``StoredDecisionProvider.NEWEST``), per patient.
_NEWEST_ORDER = f"d.patient_id, {_NEWEST_FIRST}"
_NEWEST_SQL = (
    "SELECT DISTINCT ON (d.patient_id) d.patient_id, d.decision_ref, d.status, d.priority_rank, d.expires_at"
    " FROM waitlist_bookingreliabilitydecision d WHERE d.clinic_id = %s AND d.patient_id = ANY(%s::bigint[])"
    f" ORDER BY {_NEWEST_ORDER}"
)


def decisions_newest(clinic_id: int, patient_ids: list[int]) -> list[tuple]:
    """Each patient's newest decision in the clinic: (patient id, ref, status, rank, expires_at). Fixed text (the
    ids are one array parameter), prepared once per connection: the matcher reads a page's decisions per dispatch
    (issue 15, benchmark 1)."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(_NEWEST_SQL, [clinic_id, patient_ids])
        return cursor.fetchall()


def decisions_newest_per_pair_sql(pairs: str) -> str:
    """The newest decision of each (clinic_id, patient_id) row of the relation ``pairs`` (a CTE's name): rows
    ``clinic_id, patient_id, status, expires_at``. One ordered pass (DISTINCT ON), not a lookup per patient: the
    scrape of every clinic's freshness reads ~100,000 waiting patients at 1,000 clinics (issue 27, benchmark 7)."""
    return (
        "SELECT DISTINCT ON (d.patient_id) d.clinic_id, d.patient_id, d.status, d.expires_at"
        f" FROM waitlist_bookingreliabilitydecision d JOIN {pairs} p"
        f" ON p.clinic_id = d.clinic_id AND p.patient_id = d.patient_id ORDER BY {_NEWEST_ORDER}"
    )


# --- figures (read-side aggregates: percentiles, ``ntile``, per-local-day series the ORM cannot group or has no
# aggregate for; one statement each whatever the waitlist's size, measured by benchmark 5, the console) -------------

_V, _O = VacancyStatus, OfferStatus
FILL_METRICS_SQL = f"""
WITH v AS (
    SELECT id, status, created_at, exhausted_at FROM waitlist_vacancy
    WHERE clinic_id = %(clinic)s AND created_at >= %(since)s
), o AS (
    SELECT o.id, o.vacancy_id, o.status FROM waitlist_offer o JOIN v ON v.id = o.vacancy_id
), filled AS (
    -- time to fill: vacancy opened → its booking event
    SELECT EXTRACT(EPOCH FROM MIN(e.created_at) - v.created_at) AS seconds
    FROM v JOIN waitlist_offer o ON o.vacancy_id = v.id
    JOIN waitlist_offerevent e ON e.offer_id = o.id AND e.reason_code = 'BOOKED'
    WHERE v.status = {sql_states(_V.FILLED)}
    GROUP BY v.id, v.created_at
)
SELECT
    (SELECT COUNT(*) FROM v),
    (SELECT COUNT(*) FROM v WHERE status = {sql_states(_V.FILLED)}),
    (SELECT COUNT(*) FROM v WHERE status = {sql_states(_V.CLOSED)}),
    (SELECT COUNT(*) FROM v WHERE status IN ({sql_states((_V.OPEN, _V.REVIEW))})),
    (SELECT COUNT(*) FROM v WHERE exhausted_at IS NOT NULL AND status <> {sql_states(_V.FILLED)}),
    (SELECT COUNT(*) FROM o),
    (SELECT COUNT(DISTINCT vacancy_id) FROM o),
    (SELECT COUNT(*) FROM o WHERE status = {sql_states(_O.OFFERED)}),
    (SELECT COUNT(*) FROM o WHERE status = {sql_states(_O.ACCEPTED)}),
    (SELECT COUNT(*) FROM o WHERE status = {sql_states(_O.DECLINED)}),
    (SELECT COUNT(*) FROM o WHERE status = {sql_states(_O.EXPIRED)}),
    (SELECT COUNT(*) FROM o WHERE status = {sql_states(_O.WITHDRAWN)}),
    (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FROM filled),
    (SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY seconds) FROM filled)
"""


def _one(sql: str, params: dict | list) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _all(sql: str, params: dict | list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def fill_metrics_counts(*, clinic_id: int, since: datetime) -> tuple:
    """(vacancies, filled, closed, open, exhausted, offers, offered vacancies, offered, accepted, declined,
    expired, withdrawn, time-to-fill p50, p90) over vacancies opened since ``since``: one round trip (the ORM has
    no ``percentile_cont``)."""
    return _one(FILL_METRICS_SQL, {"clinic": clinic_id, "since": since})


#: Each WAITING patient (once, with their clinic) and their newest decision, counted by clinic, status and expiry;
#: a patient without a decision counts with a NULL status (MISSING).
_DECISION_FRESHNESS_SQL = """
WITH waiting AS MATERIALIZED (
    SELECT DISTINCT e.clinic_id, e.patient_id FROM waitlist_waitlistentry e
    WHERE e.clinic_id = ANY(%(clinics)s) AND e.status = %(waiting)s
), newest AS ({newest})
SELECT w.clinic_id, n.status, n.expires_at <= %(now)s, COUNT(*)
FROM waiting w LEFT JOIN newest n ON n.clinic_id = w.clinic_id AND n.patient_id = w.patient_id
GROUP BY 1, 2, 3
"""


def decision_freshness_groups(*, clinic_ids: list[int], now: datetime, newest_sql: str) -> list[tuple]:
    """(clinic id, status or None, expired, count) per group; ``newest_sql``: the decision provider's
    ``newest_per_patient_sql("waiting")``. One statement for every clinic (issue 27, benchmark 7)."""
    return _all(_DECISION_FRESHNESS_SQL.format(newest=newest_sql),
                {"clinics": list(clinic_ids), "waiting": EntryStatus.WAITING, "now": now})


_TREND_SQL = f"""
WITH days AS (
    SELECT generate_series(%(first)s::date, %(last)s::date, interval '1 day')::date AS day
), v AS (
    SELECT id, status, created_at, (created_at AT TIME ZONE %(tz)s)::date AS day FROM waitlist_vacancy
    WHERE clinic_id = %(clinic)s AND created_at >= %(since)s
), filled AS (
    SELECT v.day, EXTRACT(EPOCH FROM MIN(e.created_at) - v.created_at) AS seconds
    FROM v JOIN waitlist_offer o ON o.vacancy_id = v.id
    JOIN waitlist_offerevent e ON e.offer_id = o.id AND e.reason_code = 'BOOKED'
    WHERE v.status = {sql_states(_V.FILLED)}
    GROUP BY v.id, v.day, v.created_at
), sent AS (
    SELECT (created_at AT TIME ZONE %(tz)s)::date AS day, COUNT(*) AS n FROM waitlist_offer
    WHERE clinic_id = %(clinic)s AND created_at >= %(since)s GROUP BY 1
), decided AS (
    SELECT day, COUNT(*) FILTER (WHERE status = {sql_states(_V.FILLED)}) AS filled,
           COUNT(*) FILTER (WHERE status IN ({sql_states((_V.FILLED, _V.CLOSED))})) AS decided
    FROM v GROUP BY day
), ttf AS (
    SELECT day, percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) AS p50 FROM filled GROUP BY day
)
SELECT d.day, COALESCE(decided.filled, 0), COALESCE(decided.decided, 0), ttf.p50, COALESCE(sent.n, 0)
FROM days d
LEFT JOIN decided ON decided.day = d.day
LEFT JOIN ttf ON ttf.day = d.day
LEFT JOIN sent ON sent.day = d.day
ORDER BY d.day
"""


def trend_days(*, clinic_id: int, tz: str, first: date, last: date, since: datetime) -> list[tuple]:
    """(day, filled, decided, time-to-fill p50, offers sent) per local day ``first``..``last``, days without
    activity included: one statement (``generate_series`` of local days, ``percentile_cont``)."""
    return _all(_TREND_SQL, {"first": first, "last": last, "tz": tz, "clinic": clinic_id, "since": since})


_FAIRNESS_OVER_TIME_SQL = """
WITH days AS (
    SELECT generate_series(%(first)s::date, %(last)s::date, interval '1 day')::date AS day
), b AS (
    SELECT (e.created_at AT TIME ZONE %(tz)s)::date AS day,
           COUNT(*) AS booked,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM e.created_at - w.waiting_since)) AS p50
    FROM waitlist_offerevent e JOIN waitlist_offer o ON o.id = e.offer_id JOIN waitlist_waitlistentry w
        ON w.id = o.entry_id
    WHERE e.clinic_id = %(clinic)s AND e.reason_code = 'BOOKED' AND e.created_at >= %(since)s GROUP BY 1
)
SELECT d.day, COALESCE(b.booked, 0), b.p50 FROM days d LEFT JOIN b ON b.day = d.day ORDER BY d.day
"""


def fairness_over_time_days(window: dict) -> list[tuple]:
    """(day, booked, median seconds waited) per local day of booking in ``window`` (first, last, tz, clinic, since)."""
    return _all(_FAIRNESS_OVER_TIME_SQL, window)


#: Whether an entry ``e`` fits a vacancy ``v``'s slot on the stored facts: the matcher's own hard-eligibility rules
#: (``RULES``) that do not depend on the moment of matching (scope, treatment, practitioner, window, not the
#: cancelling patient); what changes with time (status, suppression, consent, earlier offers, the cap) is judged by
#: each read as of its own moment.
FIT_RULES = ("SCOPE", "TREATMENT", "PRACTITIONER", "WINDOW", "UNAVAILABLE", "CANCELLING_PATIENT")
_FIT_COLUMNS = {**vacancy_columns("v"), "tz": "(SELECT z.timezone FROM scheduling_clinic z WHERE z.id = v.clinic_id)"}
_FITS = rules_sql(FIT_RULES, lambda name: (_FIT_COLUMNS[name], []))[0]

#: The states the statements name, from the models (``{open_entry}`` etc. in the templates).
_FAIRNESS_NAMES = {
    "open_entry": sql_states(OPEN_ENTRY_STATUSES),
    "active_offer": sql_states(ACTIVE_OFFER_STATUSES),
    "closed_entry": sql_states((EntryStatus.BOOKED, EntryStatus.WITHDRAWN)),
    "declined": sql_states(OfferStatus.DECLINED),
    "waiting": sql_states(EntryStatus.WAITING),
    "fits": _FITS,
}

_WAIT_REDUCTION_SQL = """
WITH booked AS (
    SELECT o.entry_id, v.starts_at, ev.created_at AS booked_at
    FROM waitlist_offer o
    JOIN waitlist_offerevent ev ON ev.offer_id = o.id AND ev.reason_code = 'BOOKED'
    JOIN waitlist_vacancy v ON v.id = o.vacancy_id
    WHERE o.clinic_id = %(clinic)s AND ev.created_at >= %(since)s
), pop AS (
    SELECT e.id, e.priority_rank, e.waiting_since, e.latest, b.starts_at, b.booked_at
    FROM waitlist_waitlistentry e LEFT JOIN booked b ON b.entry_id = e.id
    WHERE e.clinic_id = %(clinic)s AND (b.entry_id IS NOT NULL OR e.status IN ({open_entry}))
), q AS (
    SELECT priority_rank, booked_at, ntile(4) OVER (ORDER BY waiting_since, id) AS quartile,
           EXTRACT(EPOCH FROM COALESCE(booked_at, %(now)s) - waiting_since) / 86400 AS waited_days,
           CASE WHEN booked_at IS NOT NULL
                THEN GREATEST(EXTRACT(EPOCH FROM latest - starts_at) / 86400, 0) END AS sooner_days
    FROM pop
)
SELECT 'band', priority_rank, COUNT(*), COUNT(booked_at),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY waited_days),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY sooner_days), SUM(sooner_days)
FROM q GROUP BY priority_rank
UNION ALL
SELECT 'quartile', quartile, COUNT(*), COUNT(booked_at),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY waited_days),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY sooner_days), SUM(sooner_days)
FROM q GROUP BY quartile
""".format(**_FAIRNESS_NAMES)

#: The window's offers with what judging a pass-over needs of each (its vacancy's slot under the alias ``v`` that
#: ``{fits}`` names, its entry's rank, wait and resource, its policy's limits), read first (MATERIALIZED): joined
#: the other way round, the planner hashed every (entry, offer) pair of a treatment before comparing waits (20
#: million at the storm's big clinic: 50 of 67 s). One probe of the entry's offers answers both "offered this vacancy
#: before" and "held another open offer"; entries are counted per reason by grouping, not by sorting every pair.
_PASSOVER_SQL = """
WITH v AS MATERIALIZED (
    SELECT v.id, v.clinic_id, v.tenant_group_id, v.treatment_id, v.practitioner_id, v.starts_at, v.ends_at,
           v.excluded_patient_id, o.slot_fit, o.created_at AS offered_at, x.id AS offered_entry,
           x.priority_rank AS offered_rank, x.waiting_since AS offered_since, x.resource_kind,
           p.decline_suppression_hours, p.weekly_offer_cap
    FROM waitlist_offer o
    JOIN waitlist_waitlistentry x ON x.id = o.entry_id
    JOIN waitlist_vacancy v ON v.id = o.vacancy_id
    JOIN waitlist_waitlistpolicy p ON p.id = o.policy_id
    WHERE o.clinic_id = %(clinic)s AND o.created_at >= %(since)s
)
SELECT reason, SUM(n)::bigint, COUNT(*) FROM (SELECT reason, passed, COUNT(*) AS n FROM (
    SELECT e.id AS passed, CASE
        WHEN e.priority_rank < v.offered_rank THEN 'PRIORITY'
        WHEN v.slot_fit = 1 AND e.practitioner_id IS NULL THEN 'SLOT_FIT'
        WHEN EXISTS (SELECT 1 FROM waitlist_vacancyskip s WHERE s.vacancy_id = v.id AND s.entry_id = e.id)
            THEN 'STAFF_SKIPPED'
        WHEN EXISTS (SELECT 1 FROM waitlist_offer d WHERE d.entry_id = e.id AND d.status IN ({declined})
                     AND d.updated_at <= v.offered_at
                     AND d.updated_at > v.offered_at - make_interval(hours => v.decline_suppression_hours))
            THEN 'DECLINE_SUPPRESSION'
        WHEN v.weekly_offer_cap IS NOT NULL AND (
            SELECT COUNT(*) FROM waitlist_offer c WHERE c.clinic_id = v.clinic_id AND c.patient_id = e.patient_id
            AND c.created_at > v.offered_at - interval '7 days' AND c.created_at < v.offered_at
        ) >= v.weekly_offer_cap THEN 'WEEKLY_CAP'
        ELSE 'OTHER' END AS reason
    FROM v
    JOIN waitlist_waitlistentry e ON {fits}
        AND e.id <> v.offered_entry AND e.resource_kind = v.resource_kind
        AND e.waiting_since < v.offered_since AND e.created_at <= v.offered_at
        AND NOT (e.status IN ({closed_entry}) AND e.updated_at <= v.offered_at)
    WHERE NOT EXISTS (SELECT 1 FROM waitlist_offer b WHERE b.entry_id = e.id AND b.created_at <= v.offered_at
                      AND ((b.vacancy_id = v.id AND b.created_at < v.offered_at)
                           OR b.status IN ({active_offer}) OR b.updated_at > v.offered_at))
) t GROUP BY reason, passed) r GROUP BY reason
""".format(**_FAIRNESS_NAMES)

_FORGOTTEN_SQL = """
SELECT e.ref, pt.ref, e.waiting_since, e.priority_rank,
       (SELECT COUNT(*) FROM waitlist_vacancy v WHERE {fits} AND v.created_at >= %(since)s
        AND v.created_at >= e.created_at) AS eligible
FROM waitlist_waitlistentry e JOIN scheduling_patient pt ON pt.id = e.patient_id
WHERE e.clinic_id = %(clinic)s AND e.status IN ({waiting})
  AND NOT EXISTS (SELECT 1 FROM waitlist_offer o WHERE o.entry_id = e.id AND o.created_at >= %(since)s)
  AND EXISTS (SELECT 1 FROM waitlist_vacancy v WHERE {fits} AND v.created_at >= %(since)s
              AND v.created_at >= e.created_at)
ORDER BY e.waiting_since, e.id
LIMIT %(limit)s
""".format(**_FAIRNESS_NAMES)


def fairness_wait_reduction(params: dict) -> list[tuple]:
    """(kind 'band'|'quartile', group, entries, booked, waited p50, sooner p50, sooner total): ``ntile`` and
    ``percentile_cont`` over the clinic's list in one statement (``params``: clinic, since, now)."""
    return _all(_WAIT_REDUCTION_SQL, params)


def fairness_passovers(params: dict) -> list[tuple]:
    """(reason, pass-overs, entries) for the offers made since ``since`` (``params``: clinic, since)."""
    return _all(_PASSOVER_SQL, params)


def fairness_forgotten(params: dict) -> list[tuple]:
    """(entry ref, patient ref, waiting_since, rank, eligible vacancies) of WAITING entries with no offer since
    ``since`` that fitted a vacancy opened since, longest first (``params``: clinic, since, limit)."""
    return _all(_FORGOTTEN_SQL, params)
