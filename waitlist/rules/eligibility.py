"""Hard eligibility of a waitlist entry for a vacancy, defined once (issue 11).

Each rule is one SQL predicate over the entry (alias ``e``), true when the entry passes, with the
vacancy's facts as ``{name}`` placeholders. A *binding* says what a placeholder stands for: query
parameters (``PARAMS``: the matcher's page and the one-entry explanation) or the vacancy row's own
columns (``review_binding``: the console's review evidence, many vacancies in one query). Every
reader is generated from ``RULES``, so they cannot drift apart:

* the WHERE clause and ``pass_reason`` column of ``matcher.PAGE_SQL`` (``page_filters``, ``pass_reason_sql``);
* ``checks_sql``: every rule's outcome as one boolean array, read by ``matcher.ineligibility`` (the
  first failed rule is the reason code) and by ``selectors`` (the console's ``checks`` evidence).

``tests/waitlist/test_eligibility_parity.py`` checks all three against generated cases.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from waitlist.joining.availability import slot_bit_sql


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


RULES: tuple[Rule, ...] = (
    # The status literal matches the partial index's predicate (``wl_entry_match``).
    Rule("ENTRY_NOT_WAITING", "WAITING", "e.status = 'WAITING'"),
    Rule("SCOPE", "SCOPE", "e.clinic_id = {clinic} AND e.tenant_group_id = {tenant}"),
    Rule("TREATMENT", "TREATMENT", "e.treatment_id = {treatment}"),
    # The vacancy's practitioner by name (slot_fit 1) or any practitioner (practitioner_key 0, slot_fit 0).
    Rule("PRACTITIONER", "PRACTITIONER", "e.practitioner_key IN ({practitioner}, 0)", by_tier=True),
    Rule("WINDOW", "WINDOW", "e.earliest <= {starts_at} AND e.latest >= {ends_at}"),
    # When the patient can come (``joining.availability``): the slot's day and part of the day, clinic-local.
    Rule("UNAVAILABLE", "AVAILABLE", "(e.availability & " + slot_bit_sql("{starts_at}", "{tz}") + ") <> 0"),
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
        """NOT EXISTS (
      SELECT 1 FROM waitlist_offer o WHERE o.vacancy_id = {vacancy} AND o.entry_id = e.id
        AND NOT (o.status = 'WITHDRAWN' AND o.reason_code = ANY({non_barring})))""",
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
        """EXISTS (
        SELECT 1 FROM scheduling_contactconsent c
        WHERE c.patient_id = e.patient_id AND c.channel = ANY({channels}) AND c.state = 'GRANTED'
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
        """({cap}::integer IS NULL OR (
      SELECT count(*) FROM waitlist_offer w
      WHERE w.clinic_id = e.clinic_id AND w.patient_id = e.patient_id AND w.created_at > {week_ago}
        AND NOT w.standing
        AND NOT EXISTS (SELECT 1 FROM waitlist_offer a WHERE a.clinic_id = w.clinic_id
          AND a.patient_id = w.patient_id AND a.status = 'ACCEPTED' AND a.id >= w.id)
  ) < {cap}::integer)""",
    ),
)

#: The console's evidence names, in rule order.
CHECK_NAMES: tuple[str, ...] = tuple(rule.check for rule in RULES)

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


#: The rules a late accept (``services.offer_late_accept``) does not apply: they bound what the waiting list asks of
#: a patient (once per vacancy, offers a week, the pause after a decline), and the patient is the one asking now.
LATE_ACCEPT_WAIVED = ("ALREADY_OFFERED", "WEEKLY_CAP", "SUPPRESSED")


def first_failed(results, waived: tuple[str, ...] = ()) -> str | None:
    """The reason code of the first failed rule (other than ``waived`` ones), or None when every rule passed."""
    for rule, passed in zip(RULES, results, strict=True):
        if not passed and rule.code not in waived:
            return rule.code
    return None


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
