"""A patient's name and contact on detail pages for STAFF of their clinic, each look recorded for ADMIN; never in
lists, exports or URLs."""

from __future__ import annotations

import pytest
from django.urls import reverse

from operations.models import PatientContactView
from tests.conftest import seoul
from tests.operations.waitlist_helpers import make_offer

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]
HX = {"HTTP_HX_REQUEST": "true"}


def contact_url(clinic, of: str, page: str = "vacancy") -> str:
    return reverse("console:patient-contact", kwargs={"clinic_ref": clinic.ref}) + f"?of={of}&page={page}"


def test_staff_see_the_offers_patient_and_the_look_is_recorded(staff_web, world, staff):
    patient = world.patient(phone="+82 10-5555-0101")
    offer = make_offer(world, patient)
    response = staff_web.get(contact_url(world.clinic, offer.ref), **HX)
    html = response.content.decode()
    assert response.status_code == 200 and patient.display_name in html and "+82 10-5555-0101" in html
    assert "no-store" in response["Cache-Control"]
    row = PatientContactView.objects.get()
    assert (row.viewer, row.patient, row.subject_ref, row.page) == (staff, patient, offer.ref, "vacancy")


def test_the_panel_shows_a_button_not_the_contact(staff_web, world):
    patient = world.patient()
    offer = make_offer(world, patient)
    url = reverse("console:waitlist-vacancy", kwargs={"clinic_ref": world.clinic.ref, "vacancy_ref": offer.vacancy.ref})
    html = staff_web.get(url, **HX).content.decode()
    assert 'data-testid="show-contact"' in html and patient.display_name not in html
    assert not PatientContactView.objects.exists()


def test_an_appointment_page_offers_the_contact(staff_web, world):
    appointment = world.confirmed(seoul(4, 10))
    page = staff_web.get(reverse("console:ref", kwargs={"clinic_ref": world.clinic.ref, "ref": appointment.ref}))
    assert 'data-testid="show-contact"' in page.content.decode()
    response = staff_web.get(contact_url(world.clinic, appointment.ref, "ref"), **HX)
    assert appointment.patient.display_name in response.content.decode()


def test_another_clinics_staff_get_404_and_nothing_is_recorded(outsider_web, world):
    offer = make_offer(world)
    assert outsider_web.get(contact_url(world.clinic, offer.ref), **HX).status_code == 404
    assert not PatientContactView.objects.exists()


def test_a_ref_of_another_kind_or_page_is_404(staff_web, world):
    offer = make_offer(world)
    assert staff_web.get(contact_url(world.clinic, offer.vacancy.ref), **HX).status_code == 404
    assert staff_web.get(contact_url(world.clinic, offer.ref, "list"), **HX).status_code == 404
    assert not PatientContactView.objects.exists()


def test_admin_reads_the_access_log_and_staff_may_not(staff_web, admin_web, world):
    offer = make_offer(world)
    staff_web.get(contact_url(world.clinic, offer.ref), **HX)
    url = reverse("console:patient-access-log", kwargs={"clinic_ref": world.clinic.ref})
    html = admin_web.get(url).content.decode()
    assert f'data-access="{offer.patient.ref}"' in html and "staff-user" in html and offer.ref in html
    assert offer.patient.display_name not in html
    assert staff_web.get(url).status_code == 403


def test_lists_and_csv_carry_no_patient_name(staff_web, world):
    patient = world.patient()
    make_offer(world, patient)
    for kind in ("offers", "entries"):
        url = reverse("console:waitlist-list", kwargs={"clinic_ref": world.clinic.ref, "kind": kind})
        assert patient.display_name not in staff_web.get(url).content.decode()
        assert patient.display_name not in staff_web.get(url + "?format=csv").content.decode()
