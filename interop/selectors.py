"""Interop reads for the console and ``/metrics``: failing subscriptions and their notifications' health.
Refs and codes only (a subscription's endpoint is the integrator's, shown by host at most)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Min, OuterRef, Q, Subquery

from common.models import OutboxAttempt, OutboxMessage, OutboxStatus
from scheduling.models import Clinic

from .models import NOTIFICATION_TOPIC as TOPIC
from .models import AppointmentIdentifier, Subscription, SubscriptionStatus


def ehr_identifiers(*, clinic: Clinic, refs: list[str]) -> dict[str, list[str]]:
    """The EHR's ``system|value`` identifiers of the clinic's appointments among ``refs`` (the EHR's own code for
    them, not patient data), by appointment ref: one query."""
    found: dict[str, list[str]] = {}
    rows = AppointmentIdentifier.objects.filter(clinic=clinic, appointment__ref__in=[r for r in refs if r])
    for ref, system, value in rows.order_by("id").values_list("appointment__ref", "system", "value"):
        found.setdefault(ref, []).append(f"{system}|{value}")
    return found


def failing_subscriptions(*, clinic: Clinic):
    """The clinic's subscriptions in ``error`` (their endpoint kept failing; nothing is sent to them any more),
    each with the error code of its newest failed POST (``last_code``)."""
    last_code = OutboxAttempt.objects.filter(
        message__topic=TOPIC, message__aggregate_ref=OuterRef("ref"), error_code__gt=""
    ).order_by("-finished_at", "-id").values("error_code")[:1]
    return Subscription.objects.filter(clinic=clinic, status=SubscriptionStatus.ERROR).annotate(
        last_code=Subquery(last_code))


def subscription_health(*, clinic: Clinic, now: datetime) -> dict:
    """Subscriptions by status, and their notifications: undelivered (PENDING/LEASED), DEAD, and the age of
    the oldest undelivered one (two queries)."""
    by_status = dict.fromkeys(SubscriptionStatus.values, 0)
    for status, n in Subscription.objects.filter(clinic=clinic).values_list("status").annotate(n=Count("id")):
        by_status[status] = n
    undelivered = Q(status__in=[OutboxStatus.PENDING, OutboxStatus.LEASED])
    notifications = OutboxMessage.objects.filter(clinic_ref=clinic.ref, topic=TOPIC).aggregate(
        pending=Count("id", filter=undelivered),
        dead=Count("id", filter=Q(status=OutboxStatus.DEAD)),
        oldest=Min("created_at", filter=undelivered),
    )
    oldest = notifications.pop("oldest")
    return {"subscriptions": by_status, **notifications,
            "oldest_pending_age_seconds": max(0.0, (now - oldest).total_seconds()) if oldest else None}
