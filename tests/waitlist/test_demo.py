"""The demo seed: idempotent, and cancelling a CONFIRMED appointment tomorrow makes an offer and a link."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command

from common.models import AuditEntry, OutboxMessage
from scheduling.models import Appointment, AppointmentStatus, Clinic
from scheduling.services.features import feature_enabled
from tests.waitlist.loop_helpers import deliver, page_client, path_from_text
from waitlist import services
from waitlist.models import BookingReliabilityDecision, WaitlistEntry, WaitlistPolicy


def counts():
    return (WaitlistEntry.objects.count(), WaitlistPolicy.objects.count(),
            BookingReliabilityDecision.objects.count(), AuditEntry.objects.count())


def test_seed_demo_is_idempotent_and_a_cancellation_makes_an_offer(db, caplog):
    call_command("seed_demo", stdout=StringIO())
    first = counts()
    call_command("seed_demo", stdout=StringIO())
    assert counts() == first and first[0] == 5
    gangnam = Clinic.objects.get(ref="cl_demo_gangnam")
    assert feature_enabled("waitlist", gangnam)
    assert not feature_enabled("waitlist", Clinic.objects.get(ref="cl_demo_other"))  # another tenant

    appointment = (Appointment.objects.filter(clinic=gangnam, status=AppointmentStatus.CONFIRMED)
                   .order_by("starts_at").first())
    _, vacancy = services.appointment_cancel_with_vacancy(
        clinic=gangnam, appointment_ref=appointment.ref, reason="demo")
    result = services.vacancy_dispatch(clinic=gangnam, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED"
    with caplog.at_level("INFO", logger="common.notify"):
        # The seeded reevaluation runs' job_completed rows are delivered too (they have a handler).
        assert set(deliver()) == {"SENT"}
    assert OutboxMessage.objects.get(topic="waitlist.offer_made").status == "SENT"
    assert "/claim/sha256:" in caplog.text  # the console provider logs a digest, never the token
    out = StringIO()
    call_command("waitlist_claim_link", result.offer.ref, stdout=out)  # the demo's way to the link
    path = path_from_text(out.getvalue())
    assert page_client().get(path).status_code == 200


def test_the_demo_admin_reads_the_django_admin_and_changes_nothing(db):
    from django.contrib.auth import get_user_model
    from django.test import Client

    call_command("seed_demo", stdout=StringIO())
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    assert client.get("/admin/waitlist/waitlistentry/").status_code == 200
    entry = WaitlistEntry.objects.first()
    assert client.get(f"/admin/waitlist/waitlistentry/{entry.pk}/change/").status_code == 200  # view only
    assert client.post(f"/admin/waitlist/waitlistentry/{entry.pk}/change/", {"status": "WITHDRAWN"}).status_code == 403
    assert client.get("/admin/waitlist/waitlistentry/add/").status_code == 403
    assert client.get("/admin/scheduling/patient/").status_code == 403  # contacts stay out of the admin
    entry.refresh_from_db()
    assert entry.status == "WAITING"


def test_the_demo_clinics_tell_patients_their_address_and_phone(db):
    from scheduling.selectors import clinic_contact

    call_command("seed_demo", stdout=StringIO())
    for ref in ("cl_demo_gangnam", "cl_demo_lisbon"):
        address, phone = clinic_contact(Clinic.objects.get(ref=ref))
        assert address and phone.startswith("+")
    gangnam = Clinic.objects.get(ref="cl_demo_gangnam")
    assert clinic_contact(gangnam)[0].endswith("Seoul 06133")
    gangnam.settings = {**gangnam.settings, "contact": {"address": "changed by staff", "phone": "+82 2-000-0000"}}
    gangnam.save(update_fields=["settings"])
    call_command("seed_demo", stdout=StringIO())  # seeding again keeps what the clinic set
    gangnam.refresh_from_db()
    assert clinic_contact(gangnam) == ("changed by staff", "+82 2-000-0000")
