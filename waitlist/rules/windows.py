"""The unanswered streak, the one read of the answer window's rule (``terms.window_rule``): how many of an entry's
latest offers went unanswered in a row. Promotion reads the same subquery with its entry lock (``waitlist.queries``);
an offer notice's delivery reads it here.

The answer window itself is pure Python in ``terms`` (with the rest of an offer's terms); its names are importable
from here too, where the simulator (``sim.windows``) and older callers look for them.
"""

from __future__ import annotations

from waitlist import queries
from waitlist.rules.terms import (
    FIXED,
    LEAD_TIME,
    WindowRule,
    answer_deadline,
    late_acceptable,
    unanswered_limit,
    window_length,
    window_rule,
)

__all__ = [
    "FIXED", "LEAD_TIME", "NO_OFFER_BEFORE", "WindowRule", "answer_deadline", "late_acceptable", "unanswered_count",
    "unanswered_limit", "unanswered_streak", "window_length", "window_rule",
]

#: "Before no offer": the streak of an entry's latest offers, whichever they are.
NO_OFFER_BEFORE = 2**63 - 1


def unanswered_streak(policy, entry_id: int, *, before_offer_id: int | None = None) -> int:
    """How many of the entry's latest offers (before ``before_offer_id``, if given) went unanswered in a row, up
    to the policy's ``answer_window_unanswered_after``; 0 without a query when the policy has no such limit.

    An offer counts as unanswered when its window ran out (EXPIRED, reason ``EXPIRED``); a decline, an accept
    (a hold that expired after it, ``HOLD_EXPIRED``, too) answers; withdrawn offers and standing bookings are
    left out. Read at an offer's notice's delivery; promotion reads the same subquery with its entry lock
    (``waitlist.queries``)."""
    return unanswered_count(entry_id, unanswered_limit(policy), before_offer_id=before_offer_id)


def unanswered_count(entry_id: int, limit: int, *, before_offer_id: int | None = None) -> int:
    """Up to ``limit`` latest offers of one entry unanswered in a row (0: no query)."""
    if not limit:
        return 0
    return queries.unanswered_count(entry_id, limit, before_offer_id or NO_OFFER_BEFORE)
