"""A few cross-table invariants, checked after concurrent runs (refs and counts only)."""

from __future__ import annotations

from django.db.models import Count, F, Q

from common.models import DeliveryOutcome, OutboxAttempt
from reevaluation.models import JobState, ReevaluationJob
from waitlist.models import ACTIVE_OFFER_STATUSES, Offer, OfferEvent


def violations() -> list[str]:
    """Empty when: ≤ 1 active offer per vacancy; each offer changed into each state at most once;
    each outbox message was SENT at most once; each RUNNING job has one lease owner and a lease."""
    found = []
    doubled = (Offer.objects.filter(status__in=ACTIVE_OFFER_STATUSES).values("vacancy_id")
               .annotate(n=Count("id")).filter(n__gt=1))
    found += [f"vacancy {row['vacancy_id']} has {row['n']} active offers" for row in doubled]
    # A state change (not a same-state event such as BOOKED on an ACCEPTED offer) happens once per offer.
    repeated = (OfferEvent.objects.exclude(from_status="").exclude(from_status=F("to_status"))
                .values("offer_id", "to_status")
                .annotate(n=Count("id")).filter(n__gt=1))
    found += [f"offer {row['offer_id']} entered {row['to_status']} {row['n']} times" for row in repeated]
    resent = (OutboxAttempt.objects.filter(outcome=DeliveryOutcome.SENT).values("message_id")
              .annotate(n=Count("id")).filter(n__gt=1))
    found += [f"outbox message {row['message_id']} sent {row['n']} times" for row in resent]
    unleased = ReevaluationJob.objects.filter(state=JobState.RUNNING).filter(
        Q(lease_owner="") | Q(lease_expires_at__isnull=True))
    found += [f"job {ref} RUNNING without a lease" for ref in unleased.values_list("ref", flat=True)]
    return found
