"""No patient name, email or phone in logs, offer events, receipts, audit or outbox rows."""

from __future__ import annotations

import json
import logging

from django.core import serializers as django_serializers

from common import outbox
from common.models import AuditEntry, CommandReceipt, OutboxMessage
from scheduling.models import Role
from tests import factories as f
from tests.conftest import assert_no_pii, seoul, token_client
from waitlist.models import Offer, OfferClaimReceipt, OfferEvent, Vacancy, WaitlistEntry


def post(client, url, body=None, key=None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(url, body or {}, format="json", **headers)


def test_a_full_flow_leaks_no_patient_data(world, staff_api, caplog, on_commit):
    base = f"/api/v1/clinics/{world.clinic.ref}"
    cancelling = world.patient()
    waiting = [world.patient() for _ in range(3)]
    patients = [cancelling, *waiting]
    for patient in waiting:
        world.waiting(patient)
    first_slot = world.confirmed(seoul(3, 10), patient=cancelling)
    second_slot = world.confirmed(seoul(3, 11), patient=cancelling)
    answers: list[str] = []
    admin_api = token_client(f.user_with_role(world.clinic, Role.ADMIN))  # withdraw is ADMIN

    caplog.set_level(logging.DEBUG)
    with on_commit(execute=True):
        for i, appointment in enumerate((first_slot, second_slot)):
            response = post(
                staff_api, f"{base}/appointments/{appointment.ref}/cancel", {"reason": "r"}, key=f"c{i}"
            )
            answers.append(response.content.decode())
            vacancy = response.json()["vacancy"]
            dispatched = post(staff_api, f"{base}/vacancies/{vacancy}/dispatch")
            answers.append(dispatched.content.decode())
        first, second = Offer.objects.order_by("pk")
        answers.append(
            post(
                admin_api, f"{base}/offers/{first.ref}/decline", {"reason": "busy"}, key="d"
            ).content.decode()
        )
        cascade = Offer.objects.filter(vacancy=first.vacancy).exclude(pk=first.pk).first()
        claim = post(staff_api, f"{base}/offers/{second.ref}/claim", {"expected_version": 1}, key="cl")
        answers.append(claim.content.decode())
        answers.append(
            post(staff_api, f"{base}/holds/{claim.json()['hold']}/book", key="bk").content.decode()
        )
        if cascade is not None:
            answers.append(
                post(
                    admin_api, f"{base}/offers/{cascade.ref}/withdraw", {"reason": "r"}, key="w"
                ).content.decode()
            )
        for entry in WaitlistEntry.objects.all():
            answers.append(staff_api.get(f"{base}/waitlist-entries/{entry.ref}").content.decode())
        for offer in Offer.objects.all():
            answers.append(staff_api.get(f"{base}/offers/{offer.ref}").content.decode())

    outbox.outbox_deliver_due(worker="privacy")  # the notices go out too (console provider: it logs)
    assert OutboxMessage.objects.filter(topic="waitlist.booking_confirmed").count() == 1  # the booking's
    assert OfferEvent.objects.count() >= 5 and OutboxMessage.objects.count() >= 2  # the flow ran
    assert "reason=MATCHED" in caplog.text and "reason=BOOKED" in caplog.text  # the logs were captured
    stored = [
        caplog.text,
        *answers,
        json.dumps(list(OfferEvent.objects.values()), default=str),
        json.dumps(list(OfferClaimReceipt.objects.values()), default=str),
        json.dumps(list(CommandReceipt.objects.values()), default=str),
        json.dumps(list(OutboxMessage.objects.values()), default=str),
        json.dumps(list(AuditEntry.objects.values()), default=str),
        django_serializers.serialize("json", [*Vacancy.objects.all(), *Offer.objects.all()]),
    ]
    for text in stored:
        assert_no_pii(text, patients)
    # The outbox carries what delivery needs, by reference only.
    payload = OutboxMessage.objects.filter(topic="waitlist.offer_made").first().payload
    assert set(payload) == {
        "offer",
        "vacancy",
        "entry",
        "patient",
        "hold",
        "expires_at",
        "template",
        "language",
    }
    confirmation = OutboxMessage.objects.get(topic="waitlist.booking_confirmed").payload
    assert set(confirmation) == {"offer", "appointment", "vacancy", "entry", "patient", "booked_at", "template",
                                 "language"}
