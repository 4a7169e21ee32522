"""The texts' Action-queue sources (registered in ``waitlist.figures.queue.SOURCES``). Refs and codes only."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, Subquery

from common.timefmt import iso_in_zone
from scheduling.models import Patient
from waitlist.models import OfferStatus
from waitlist.texts.models import FAILED_STATUSES, BookingAck, TextMessage, TextStatus

if TYPE_CHECKING:
    from waitlist.figures.queue import QueuePage, QueueRow


def unacknowledged_rows(page: QueuePage) -> list[QueueRow]:
    """``BOOKING_UNACKNOWLEDGED``: an automatic booking that still stands and the patient has not acknowledged
    yet, with the seconds left before it is released (``release_at``); since it was booked."""
    from waitlist.figures.queue import QueueRow

    tz = page.clinic.timezone
    # Only a booking that still stands: one the patient released (the claim page, a NO) is nobody's call to make.
    waiting = BookingAck.objects.filter(clinic=page.clinic, acknowledged_at=None, released_at=None,
                                        offer__status=OfferStatus.ACCEPTED)
    return [
        QueueRow(a["booked_at"], "BOOKING_UNACKNOWLEDGED", a["offer__ref"], {
            "reason_code": "REMINDED" if a["reminded_at"] else "UNACKNOWLEDGED", "offer": a["offer__ref"],
            "starts_at": iso_in_zone(a["starts_at"], tz), "release_at": iso_in_zone(a["release_at"], tz),
            "seconds_left": max(0, int((a["release_at"] - page.now).total_seconds()))})
        for a in page.take(waiting, "booked_at", "BOOKING_UNACKNOWLEDGED", "offer__ref", "booked_at", "starts_at",
                           "release_at", "reminded_at", ref_field="offer__ref")
    ]


def failing_texts_rows(page: QueuePage) -> list[QueueRow]:
    """``TEXTS_FAILING``: a patient whose last ``TEXT_FAILING_AFTER`` (2) texts of the last 14 days failed or went
    undelivered and none was delivered since; since the last failure. Their notices fall back to e-mail where
    they consented; the number on file may be wrong."""
    from waitlist.figures.queue import QueueRow

    since = page.now - timedelta(days=14)
    texts = TextMessage.objects.filter(patient=OuterRef("pk"), created_at__gte=since)
    failed = texts.filter(status__in=FAILED_STATUSES)
    last_failed = failed.order_by("-status_at", "-pk")
    failures = failed.order_by().values("patient").annotate(n=Count("pk")).values("n")[:1]
    delivered_after = texts.filter(status=TextStatus.DELIVERED, status_at__gt=OuterRef("last_failed_at"))
    patients = Patient.objects.filter(clinic=page.clinic).annotate(
        last_failed_at=Subquery(last_failed.values("status_at")[:1]),
        last_code=Subquery(last_failed.values("error_code")[:1]),
        failures=Subquery(failures, output_field=IntegerField()),
    ).filter(Q(failures__gte=settings.TEXT_FAILING_AFTER), ~Exists(delivered_after))
    return [
        QueueRow(p["last_failed_at"], "TEXTS_FAILING", p["ref"], {
            "reason_code": f"TWILIO_{p['last_code']}" if p["last_code"] else "TEXT_FAILED", "patient": p["ref"],
            "failures": p["failures"]})
        for p in page.take(patients, "last_failed_at", "TEXTS_FAILING", "ref", "last_failed_at", "last_code",
                           "failures")
    ]
