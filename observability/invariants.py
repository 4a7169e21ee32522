"""Cross-app invariants checked in SQL: nothing lost, nothing duplicated, every row in a legal state.

Used after fault injection (tests/faults), every minute by the soak run, and by the benchmarks. Each
check is one aggregate query that counts violating rows (no table is loaded into Python), optionally
limited to some clinics. ``check()`` returns the counts; ``report.ok`` is True when all are zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from common.models import AuditEntry, OutboxAttempt, OutboxMessage
from reevaluation.models import JobState, ReevaluationJob
from scheduling.models import Appointment, CapacityAllocation, CapacityHold
from waitlist.models import Offer, OfferEvent, Vacancy, WaitlistEntry

_T = {
    "offer": Offer._meta.db_table,
    "event": OfferEvent._meta.db_table,
    "entry": WaitlistEntry._meta.db_table,
    "vacancy": Vacancy._meta.db_table,
    "hold": CapacityHold._meta.db_table,
    "alloc": CapacityAllocation._meta.db_table,
    "apt": Appointment._meta.db_table,
    "job": ReevaluationJob._meta.db_table,
    "msg": OutboxMessage._meta.db_table,
    "attempt": OutboxAttempt._meta.db_table,
    "audit": AuditEntry._meta.db_table,
}
_JOB_STATES = ", ".join(f"'{state}'" for state in JobState.values)

#: name → SQL counting violating rows. ``{scope:x}`` limits alias x to the checked clinics.
CHECKS: dict[str, str] = {
    # Offers and vacancies: one active offer per vacancy and per entry, states agree.
    "vacancies_with_more_than_one_active_offer": """
        SELECT count(*) FROM (SELECT o.vacancy_id FROM {offer} o WHERE o.status IN ('OFFERED','ACCEPTED') {scope:o}
        GROUP BY o.vacancy_id HAVING count(*) > 1) x""",
    "entries_with_more_than_one_active_offer": """
        SELECT count(*) FROM (SELECT o.entry_id FROM {offer} o WHERE o.status IN ('OFFERED','ACCEPTED') {scope:o}
        GROUP BY o.entry_id HAVING count(*) > 1) x""",
    "offered_offers_whose_entry_is_not_offered": """
        SELECT count(*) FROM {offer} o JOIN {entry} e ON e.id = o.entry_id
        WHERE o.status = 'OFFERED' AND e.status <> 'OFFERED' {scope:o}""",
    "offered_entries_without_an_offered_offer": """
        SELECT count(*) FROM {entry} e WHERE e.status = 'OFFERED' {scope:e}
        AND NOT EXISTS (SELECT 1 FROM {offer} o WHERE o.entry_id = e.id AND o.status = 'OFFERED')""",
    "open_vacancies_with_an_accepted_offer_and_booking": """
        SELECT count(*) FROM {vacancy} v JOIN {offer} o ON o.vacancy_id = v.id AND o.status = 'ACCEPTED'
        JOIN {hold} h ON h.id = o.hold_id AND h.status = 'CONSUMED' WHERE v.status = 'OPEN' {scope:v}""",
    # Holds and allocations: every live offer has a live hold, one active allocation per hold.
    "offered_offers_without_an_active_hold": """
        SELECT count(*) FROM {offer} o JOIN {hold} h ON h.id = o.hold_id
        WHERE o.status = 'OFFERED' AND h.status <> 'ACTIVE' {scope:o}""",
    "accepted_offers_without_an_accepted_or_consumed_hold": """
        SELECT count(*) FROM {offer} o JOIN {hold} h ON h.id = o.hold_id
        WHERE o.status = 'ACCEPTED' AND h.status NOT IN ('ACCEPTED','CONSUMED') {scope:o}""",
    "holds_with_more_than_one_active_allocation": """
        SELECT count(*) FROM (SELECT a.hold_id FROM {alloc} a WHERE a.active AND a.hold_id IS NOT NULL {scope:a}
        GROUP BY a.hold_id HAVING count(*) > 1) x""",
    "live_holds_without_an_active_allocation": """
        SELECT count(*) FROM {hold} h WHERE h.status IN ('ACTIVE','ACCEPTED') {scope:h}
        AND NOT EXISTS (SELECT 1 FROM {alloc} a WHERE a.hold_id = h.id AND a.active)""",
    "released_holds_with_an_active_allocation": """
        SELECT count(*) FROM {hold} h WHERE h.status = 'RELEASED' {scope:h}
        AND EXISTS (SELECT 1 FROM {alloc} a WHERE a.hold_id = h.id AND a.active)""",
    # Bookings: no CONFIRMED double booking of a practitioner.
    "confirmed_double_bookings": """
        SELECT count(*) FROM {apt} a JOIN {apt} b ON a.id < b.id AND a.practitioner_id = b.practitioner_id
        AND a.starts_at < b.ends_at AND b.starts_at < a.ends_at
        WHERE a.status = 'CONFIRMED' AND b.status = 'CONFIRMED' {scope:a}""",
    # Offer history: exactly one creation event per offer (from no state; OFFERED → OFFERED events such
    # as NOTICE_DELIVERED are not creations), no transition recorded twice.
    "offers_without_exactly_one_creation_event": """
        SELECT count(*) FROM {offer} o WHERE 1 = 1 {scope:o} AND (SELECT count(*) FROM {event} ev
        WHERE ev.offer_id = o.id AND ev.to_status = 'OFFERED' AND COALESCE(ev.from_status, '') = '') <> 1""",
    "offers_with_a_duplicated_transition_event": """
        SELECT count(*) FROM (SELECT 1 FROM {event} ev JOIN {offer} o ON o.id = ev.offer_id WHERE 1 = 1 {scope:o}
        GROUP BY ev.offer_id, ev.from_status, ev.to_status, ev.reason_code HAVING count(*) > 1) x""",
    "offers_whose_state_has_no_event": """
        SELECT count(*) FROM {offer} o WHERE 1 = 1 {scope:o} AND NOT EXISTS (SELECT 1 FROM {event} ev
        WHERE ev.offer_id = o.id AND ev.to_status = o.status)""",
    # Reevaluation jobs: legal states, RUNNING always under a (live or expired) lease, bounded attempts.
    "jobs_in_an_unknown_state": """
        SELECT count(*) FROM {job} j WHERE j.state NOT IN (__JOB_STATES__) {scope:j}""",
    "running_jobs_without_a_lease": """
        SELECT count(*) FROM {job} j WHERE j.state = 'RUNNING' {scope:j}
        AND (j.lease_owner = '' OR j.lease_expires_at IS NULL)""",
    "jobs_over_their_attempt_budget": """
        SELECT count(*) FROM {job} j WHERE j.attempts > j.max_attempts {scope:j}""",
    # Outbox: each message delivered at most once, and a delivered message is marked SENT (a skipped one,
    # e.g. for an offer closed before its notice went out, is SENT with no send time: not checked).
    "outbox_messages_delivered_more_than_once": """
        SELECT count(*) FROM (SELECT t.message_id FROM {attempt} t JOIN {msg} m ON m.id = t.message_id
        WHERE t.outcome = 'SENT' {scope_ref:m} GROUP BY t.message_id HAVING count(*) > 1) x""",
    "outbox_messages_delivered_but_not_marked_sent": """
        SELECT count(*) FROM {msg} m WHERE m.status <> 'SENT' {scope_ref:m}
        AND EXISTS (SELECT 1 FROM {attempt} t WHERE t.message_id = m.id AND t.outcome = 'SENT')""",
    "leased_outbox_messages_without_a_lease": """
        SELECT count(*) FROM {msg} m WHERE m.status = 'LEASED' AND m.lease_expires_at IS NULL {scope_ref:m}""",
    # Audit: one row per idempotent command, never two.
    "duplicated_audit_rows": """
        SELECT count(*) FROM (SELECT 1 FROM {audit} m WHERE m.idempotency_key <> '' {scope_ref:m}
        GROUP BY m.action, m.clinic_ref, m.target_ref, m.idempotency_key HAVING count(*) > 1) x""",
}

#: Counts reported next to the checks (rows seen), so a run can say what it covered.
TOTALS: dict[str, str] = {
    "offers": "SELECT count(*) FROM {offer} o WHERE 1 = 1 {scope:o}",
    "holds": "SELECT count(*) FROM {hold} h WHERE 1 = 1 {scope:h}",
    "confirmed_appointments": "SELECT count(*) FROM {apt} a WHERE a.status = 'CONFIRMED' {scope:a}",
    "jobs": "SELECT count(*) FROM {job} j WHERE 1 = 1 {scope:j}",
    "outbox_messages": "SELECT count(*) FROM {msg} m WHERE 1 = 1 {scope_ref:m}",
    "audit_rows": "SELECT count(*) FROM {audit} m WHERE 1 = 1 {scope_ref:m}",
}


@dataclass
class InvariantReport:
    violations: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def failed(self) -> dict[str, int]:
        return {name: count for name, count in self.violations.items() if count}

    def summary(self) -> str:
        totals = ", ".join(f"{k}={v}" for k, v in self.totals.items())
        return f"invariants {'OK' if self.ok else 'VIOLATED ' + str(self.failed())} ({totals})"


def _render(sql: str, scoped: bool) -> str:
    text = sql.replace("__JOB_STATES__", _JOB_STATES)
    for alias in "oevhajm":
        text = text.replace(f"{{scope:{alias}}}", f"AND {alias}.clinic_id = ANY(%(c)s)" if scoped else "")
        text = text.replace(f"{{scope_ref:{alias}}}", f"AND {alias}.clinic_ref = ANY(%(r)s)" if scoped else "")
    return text.format(**_T)


def check(clinic_ids: list[int] | None = None, *, using=None) -> InvariantReport:
    """Count violations (and rows) across all clinics, or only ``clinic_ids``."""
    from scheduling.models import Clinic

    scoped = clinic_ids is not None
    params: dict[str, Any] = {}
    if clinic_ids is not None:
        refs = Clinic.objects.filter(pk__in=clinic_ids).values_list("ref", flat=True)
        params = {"c": list(clinic_ids), "r": list(refs)}
    report = InvariantReport()
    conn = connection if using is None else using
    with conn.cursor() as cursor:
        for target, queries in ((report.violations, CHECKS), (report.totals, TOTALS)):
            for name, sql in queries.items():
                cursor.execute(_render(sql, scoped), params)
                target[name] = cursor.fetchone()[0]
    return report
