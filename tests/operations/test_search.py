"""The console's search box: any ref in the user's clinics opens; unknown and foreign refs are not found."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests import factories as f
from tests.conftest import seoul
from tests.operations.conftest import make_audit
from tests.operations.waitlist_helpers import make_offer
from tests.waitlist.factories import WaitlistEntryFactory
from tests.worlds import waitlist_world

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]


def search(client, query):
    return client.get(reverse("console:search"), {"q": query})


def test_an_offer_ref_opens_its_vacancy_panel(staff_web, clinic, staff):
    offer = make_offer(waitlist_world(clinic, staff), starts_at=seoul(3, 10))
    response = search(staff_web, offer.ref)
    assert response.status_code == 302
    assert response["Location"] == reverse(
        "console:waitlist-vacancy", kwargs={"clinic_ref": clinic.ref, "vacancy_ref": offer.vacancy.ref}
    )


def test_an_entry_ref_opens_the_ref_page_with_names_and_no_patient_data(staff_web, clinic, staff):
    world = waitlist_world(clinic, staff)
    entry = WaitlistEntryFactory(clinic=clinic, treatment=world.treatment)
    page = staff_web.get(search(staff_web, entry.ref)["Location"])
    text = page.content.decode()
    assert page.status_code == 200 and entry.ref in text and world.treatment.name in text
    assert entry.patient.display_name not in text and entry.patient.email not in text


def test_an_appointment_and_an_audit_row_are_found(staff_web, clinic):
    appointment = f.AppointmentFactory(clinic=clinic, starts_at=seoul(3, 9))
    audit = make_audit(clinic, 1)[0]
    for ref in (appointment.ref, audit.ref):
        location = search(staff_web, ref)["Location"]
        assert location == reverse("console:ref", kwargs={"clinic_ref": clinic.ref, "ref": ref})
        assert staff_web.get(location).status_code == 200


def test_a_foreign_ref_is_answered_like_an_unknown_one(staff_web, clinic):
    foreign = make_offer(waitlist_world(), starts_at=seoul(3, 10))
    foreign_answer, unknown_answer = search(staff_web, foreign.ref), search(staff_web, "off_doesnotexist")
    assert foreign_answer.status_code == unknown_answer.status_code == 404
    assert foreign.ref not in foreign_answer.content.decode().replace(f"<code>{foreign.ref}</code>", "", 1)
    assert foreign_answer.content.decode().count(foreign.vacancy.ref) == 0


def test_the_ref_page_of_another_clinics_ref_is_404(staff_web, clinic, other_tenant_clinic):
    appointment = f.AppointmentFactory(clinic=other_tenant_clinic, starts_at=seoul(3, 9))
    url = reverse("console:ref", kwargs={"clinic_ref": clinic.ref, "ref": appointment.ref})
    assert staff_web.get(url).status_code == 404


def test_search_needs_a_signed_in_user(client):
    assert search(client, "vac_x").status_code == 302
