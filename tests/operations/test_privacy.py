"""No patient names, e-mails or phone numbers on any console page, with patients and their rows in the DB."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from scheduling.models import AppointmentStatus
from tests import factories as f
from tests.conftest import assert_no_pii
from tests.operations.conftest import make_audit

pytestmark = pytest.mark.django_db


@pytest.fixture
def patients(clinic, second_clinic):
    people = [f.PatientFactory(clinic=clinic) for _ in range(3)] + [f.PatientFactory(clinic=second_clinic)]
    for person in people:
        f.AppointmentFactory(clinic=person.clinic, patient=person, status=AppointmentStatus.CONFIRMED)
    # Audit rows about those patients carry refs only, as every service must write them.
    for person in people:
        make_audit(person.clinic, 2, target_ref=person.ref, result={"patient": person.ref, "status": "OK"})
    return people


def console_urls(clinic, second_clinic) -> list[str]:
    urls = []
    for c in (clinic, second_clinic):
        urls += [
            reverse("console:clinic-home", kwargs={"clinic_ref": c.ref}),
            reverse("console:audit", kwargs={"clinic_ref": c.ref}),
            reverse("console:audit", kwargs={"clinic_ref": c.ref}) + "?action=offer.withdraw",
        ]
    return urls


def test_no_console_page_shows_patient_data(staff_web, admin_web, clinic, second_clinic, patients):
    assert len(patients) == 4
    for web in (staff_web, admin_web):
        for url in console_urls(clinic, second_clinic):
            response = web.get(url, follow=True)
            assert response.status_code in (200, 404), url
            assert_no_pii(response.content.decode(), patients)
            fragment = web.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="audit-results")
            assert_no_pii(fragment.content.decode(), patients)


def test_index_login_and_error_pages_show_no_patient_data(staff_web, client, clinic, patients):
    for response in (
        staff_web.get(reverse("console:index"), follow=True),
        staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": patients[0].ref})),
        client.get(reverse("console:login")),
        client.post(reverse("console:login"), {"username": patients[0].email, "password": "x"}),
    ):
        assert_no_pii(response.content.decode(), patients)
    nobody = Client()
    nobody.force_login(f.UserFactory())
    assert_no_pii(nobody.get(reverse("console:index")).content.decode(), patients)
