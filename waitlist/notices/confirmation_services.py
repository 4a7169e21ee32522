"""The booking confirmation notice: one outbox row, written inside the transaction that books.

Every path that turns a waitlist offer into a CONFIRMED appointment calls ``booking_confirmation_queue``
in its own transaction (``offer_book``, which the claim page's accept, the booking command of the API
and the console, reconcile and retry-booking all run; the standing-acceptance booking made by dispatch
calls it too), so the notice exists if and only if the booking commits. Delivery
(``waitlist.notices.confirmation.deliver_booking_confirmation``) renders it at send time; the commit queues a
delivery run (``queue_delivery``), so the patient hears within a second that the slot they claimed is theirs,
not at beat's next outbox tick.
"""

from __future__ import annotations

from datetime import datetime

from common.models import OutboxMessage
from common.services import outbox_enqueue
from scheduling.models import Appointment
from waitlist.effects import queue_delivery
from waitlist.models import Offer

BOOKING_CONFIRMED_TOPIC = "waitlist.booking_confirmed"
BOOKING_CONFIRMED_TEMPLATE = "booking_confirmed_v1"


def booking_confirmation_queue(*, offer: Offer, appointment: Appointment, correlation_id: str, now: datetime,
                               release_until: datetime | None = None) -> OutboxMessage:
    """Queue the "you are booked" notice of ``appointment`` (booked from ``offer``) in the caller's transaction.

    The payload carries refs only (no name, contact or link). ``release_until``: the booking was made
    automatically (standing acceptance) and the patient may release it until then; the notice then says
    so and carries the release link, which is built at send time by the builder registered with
    ``waitlist.notices.confirmation.release_link_register`` (a link is a bearer credential, never stored here).
    """
    patient, vacancy = appointment.patient, offer.vacancy
    payload = {
        "offer": offer.ref,
        "appointment": appointment.ref,
        "vacancy": vacancy.ref,
        "entry": offer.entry.ref,
        "patient": patient.ref,
        "booked_at": now.isoformat(),
        "template": BOOKING_CONFIRMED_TEMPLATE,
        "language": patient.language,
    }
    if release_until is not None:
        payload["release_until"] = release_until.isoformat()
    queue_delivery()
    return outbox_enqueue(
        topic=BOOKING_CONFIRMED_TOPIC,
        tenant_group_ref=vacancy.tenant_group.ref,
        clinic_ref=offer.clinic.ref,
        aggregate_ref=appointment.ref,
        payload=payload,
        channel="sms" if patient.phone else ("email" if patient.email else "none"),
        correlation_id=correlation_id,
        recipient_ref=patient.ref,
    )
