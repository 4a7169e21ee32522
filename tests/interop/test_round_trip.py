"""The EHR in the loop, on real connections: the EHR PUTs a booked appointment over HTTP, then PUTs it
cancelled; the vacancy is offered, claimed and booked through the API; a loopback subscriber receives the
new booked Appointment and each change of the vacancy's Slot exactly once, every body valid FHIR."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
import requests
from fhir.resources.R4B.appointment import Appointment as FhirAppointment
from fhir.resources.R4B.slot import Slot as FhirSlot
from rest_framework.authtoken.models import Token

from common import outbox
from interop.fhir import fhir_id
from interop.models import AppointmentIdentifier
from interop.services.subscriptions import subscriptions_fanout
from scheduling.models import Appointment, AppointmentStatus
from tests.conftest import seoul
from tests.interop.ehr import EHR_SYSTEM, appointment, ehr_user
from tests.support.servers import http_receiver
from tests.worlds import waitlist_world
from waitlist import services as waitlist
from waitlist.models import Vacancy, VacancyStatus

pytestmark = [pytest.mark.usefixtures("no_broker"), pytest.mark.race]


def tick():
    """What beat does every few seconds: fan out, then deliver."""
    subscriptions_fanout()
    outbox.outbox_deliver_due(worker="round-trip")


@pytest.mark.django_db(transaction=True)
def test_the_ehr_books_and_cancels_and_is_told_of_the_refill(live_server):
    world = waitlist_world()
    ehr = requests.Session()
    ehr.headers.update({"Authorization": f"Token {Token.objects.get_or_create(user=ehr_user(world.clinic))[0].key}",
                        "Accept": "application/fhir+json", "Content-Type": "application/fhir+json"})
    staff = requests.Session()
    staff.headers["Authorization"] = f"Token {Token.objects.get_or_create(user=world.staff)[0].key}"
    base = f"{live_server.url}/api/v1/clinics/{world.clinic.ref}"
    waiting = world.waiting()
    with http_receiver() as (url, seen):
        secrets = {}
        for criteria in ("Appointment?status=booked", "Slot?status=free,busy-tentative,busy"):
            created = ehr.post(f"{base}/fhir/Subscription", data=json.dumps({
                "resourceType": "Subscription", "status": "requested", "reason": "sync", "criteria": criteria,
                "channel": {"type": "rest-hook", "endpoint": f"{url}/{criteria[:4]}",
                            "payload": "application/fhir+json"}}))
            assert created.status_code == 201, created.content
            secrets[f"/{criteria[:4]}"] = created.json()["extension"][0]["valueString"]

        body = appointment(world, world.patient(), seoul(5, 11))
        put = f"{base}/fhir/Appointment?identifier={EHR_SYSTEM}|E-77"
        assert ehr.put(put, data=json.dumps(body)).status_code == 201
        tick()
        assert ehr.put(put, data=json.dumps({**body, "status": "cancelled"})).status_code == 200
        tick()
        vacancy = Vacancy.objects.get(clinic=world.clinic)
        offer = waitlist.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer  # the queued task
        tick()
        offer.refresh_from_db()  # its notice went out in the tick (the offer's version moved)
        claim = staff.post(f"{base}/offers/{offer.ref}/claim", json={"expected_version": offer.version},
                           headers={"Idempotency-Key": "claim-1"})
        assert claim.status_code == 200, claim.content
        booked = staff.post(f"{base}/holds/{claim.json()['hold']}/book", headers={"Idempotency-Key": "book-1"})
        assert booked.status_code == 201, booked.content
        tick()
        tick()  # nothing more to say

    refill = Appointment.objects.get(ref=booked.json()["appointment"])
    assert (refill.status, refill.patient_id) == (AppointmentStatus.CONFIRMED, waiting.patient_id)
    assert Vacancy.objects.get(pk=vacancy.pk).status == VacancyStatus.FILLED
    for request in seen:
        expected = hmac.new(secrets[request["path"]].encode(), request["body"], hashlib.sha256).hexdigest()
        assert request["headers"]["X-Signature"] == f"sha256={expected}"
    appointments = [FhirAppointment.model_validate_json(r["body"]) for r in seen if r["path"] == "/Appo"]
    slots = [FhirSlot.model_validate_json(r["body"]) for r in seen if r["path"] == "/Slot"]
    ehr_ref = AppointmentIdentifier.objects.get(value="E-77").appointment.ref
    assert [(a.id, a.status) for a in appointments] == [(fhir_id(ehr_ref), "booked"), (fhir_id(refill.ref), "booked")]
    assert [(s.id, s.status) for s in slots] == [
        (fhir_id(vacancy.ref), "free"), (fhir_id(vacancy.ref), "busy-tentative"), (fhir_id(vacancy.ref), "busy")]
