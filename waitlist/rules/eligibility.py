"""Hard eligibility of a waitlist entry for a vacancy, defined once (issue 11).

Each rule is one SQL predicate over the entry (alias ``e``), true when the entry passes, with the
vacancy's facts as ``{name}`` placeholders. A *binding* says what a placeholder stands for: query
parameters (``PARAMS``: the matcher's page and the one-entry explanation) or the vacancy row's own
columns (``review_binding``: the console's review evidence, many vacancies in one query). Every
reader is generated from ``RULES``, so they cannot drift apart. Their SQL text and builders live in the app's
query module (``waitlist.queries``) and are re-exported here with the decisions made on their results:

* the WHERE clause and ``pass_reason`` column of ``queries.PAGE_SQL`` (``page_filters``, ``pass_reason_sql``);
* ``checks_sql``: every rule's outcome as one boolean array, read by ``matcher.ineligibility`` (the
  first failed rule is the reason code) and by ``selectors`` (the console's ``checks`` evidence).

``tests/waitlist/test_eligibility_parity.py`` checks all three against generated cases.
"""

from __future__ import annotations

from waitlist.queries import (
    PARAMS,
    RULES,
    Binding,
    Rule,
    checks_sql,
    page_filters,
    pass_reason_sql,
    render,
    rules_sql,
    vacancy_columns,
    vacancy_row_binding,
)

__all__ = [
    "CHECK_NAMES", "LATE_ACCEPT_WAIVED", "PARAMS", "RULES", "Binding", "Rule", "checks_sql", "first_failed",
    "page_filters", "pass_reason_sql", "render", "rules_sql", "vacancy_columns", "vacancy_row_binding",
]

#: The console's evidence names, in rule order.
CHECK_NAMES: tuple[str, ...] = tuple(rule.check for rule in RULES)

#: The rules a late accept (``services.offer_late_accept``) does not apply: they bound what the waiting list asks of
#: a patient (once per vacancy, offers a week, the pause after a decline), and the patient is the one asking now.
LATE_ACCEPT_WAIVED = ("ALREADY_OFFERED", "WEEKLY_CAP", "SUPPRESSED")


def first_failed(results, waived: tuple[str, ...] = ()) -> str | None:
    """The reason code of the first failed rule (other than ``waived`` ones), or None when every rule passed."""
    for rule, passed in zip(RULES, results, strict=True):
        if not passed and rule.code not in waived:
            return rule.code
    return None


