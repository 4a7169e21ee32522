"""Interop's rows in the operations Action queue (registered with the waitlist's queue at ``ready()``)."""

from __future__ import annotations

from waitlist.figures.queue import QueuePage, QueueRow

from .selectors import failing_subscriptions


def subscription_rows(page: QueuePage) -> list[QueueRow]:
    """``SUBSCRIPTION_ERROR``: an EHR's FHIR subscription set to ``error`` (its endpoint kept failing): nothing
    is sent to it until it is created again."""
    return [
        QueueRow(s["updated_at"], "SUBSCRIPTION_ERROR", s["ref"], {
            "reason_code": s["last_code"] or "SUBSCRIPTION_ERROR", "subscription": s["ref"],
            "criteria": s["criteria"], "failures": s["consecutive_failures"]})
        for s in page.take(failing_subscriptions(clinic=page.clinic), "updated_at", "SUBSCRIPTION_ERROR", "ref",
                           "updated_at", "criteria", "consecutive_failures", "last_code")
    ]
