"""No patient names, e-mails or phone numbers on any console page, with patients and their rows in the DB."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from reevaluation.models import JobState, QuarantineCase, ReevaluationJob
from scheduling.models import AppointmentStatus
from tests import factories as f
from tests.conftest import assert_no_pii
from tests.operations.conftest import make_audit, signed_in
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event
from tests.worlds import ReevaluationWorld

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
            reverse("console:waitlist", kwargs={"clinic_ref": c.ref}),
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


def test_reevaluation_pages_show_no_patient_data(staff_web, admin_web, clinic, second_clinic, patients):
    """The page, the detail panel, both "load more" fragments, the preview and the execute result."""
    world = ReevaluationWorld(clinic)
    everyone = [*patients, world.patient, world.other_patient]
    world.book("HELD", 10)
    refs = [post_event(world, world.fp, 1).job_ref]
    refs += [post_event(world, rf.fingerprint(f"{world.crm_ref}-{i}"), 1).job_ref for i in range(24)]
    failed = ReevaluationJob.objects.filter(ref__in=refs[1:])
    failed.update(state=JobState.FAILED, last_failure_code="ASSESSMENT_TIMEOUT")
    for _ in range(12):
        QuarantineCase.objects.create(
            reason_code="PRIVACY_BOUNDARY", category="PRIVACY", evidence_digest="f" * 64, clinic=clinic
        )
    page = reverse("console:reevaluation", kwargs={"clinic_ref": clinic.ref})
    hx = {"HTTP_HX_REQUEST": "true"}
    html = admin_web.get(page).content.decode()
    texts = [html, staff_web.get(page).content.decode()]
    texts.append(admin_web.get(page, HTTP_HX_TARGET="reeval-snapshot", **hx).content.decode())
    for name in ("after", "qafter"):
        after = re.search(rf'hx-get="[^"]*\?{name}=([^"&]+)"', html).group(1)
        texts.append(admin_web.get(f"{page}?{name}={after}", **hx).content.decode())
    for ref in refs[:3]:
        job_url = reverse("console:reevaluation-job", kwargs={"clinic_ref": clinic.ref, "job_ref": ref})
        texts += [admin_web.get(job_url, **hx).content.decode(), admin_web.get(job_url).content.decode()]
    preview = admin_web.post(
        reverse("console:reevaluation-preview", kwargs={"clinic_ref": clinic.ref}),
        {"reason": "CRM outage over", "limit": 5, "idempotency_key": "priv-1"},
        **hx,
    ).content.decode()
    preview_ref = re.search(r'name="preview" value="([^"]+)"', preview).group(1)
    result = admin_web.post(
        reverse("console:reevaluation-execute", kwargs={"clinic_ref": clinic.ref}),
        {"preview": preview_ref, "reason": "CRM outage over", "confirm": "on", "idempotency_key": "priv-2"},
        **hx,
    ).content.decode()
    assert 'data-testid="execute-result"' in result
    audit = admin_web.get(reverse("console:audit", kwargs={"clinic_ref": clinic.ref})).content.decode()
    for text in [*texts, preview, result, audit]:
        assert_no_pii(text, everyone)
        assert world.fp not in text  # the full fingerprint never shows either


def test_waitlist_pages_show_no_patient_data(admin, clinic, staff, patients, settings, monkeypatch):
    """The page, the readiness poll, queue refresh and "load more", the vacancy panel, every command's
    result, and the audit log, with the waitlist's patients (names, e-mails, phones) in the database."""
    import time_machine

    from scheduling.models import Patient
    from tests.operations.waitlist_helpers import bulk_reviews, dead_delivery_offer, review_vacancy, waitlist_world
    from tests.waitlist.factories import NOW
    from waitlist import services, tasks

    settings.CONSOLE_WAITLIST_PAGE_SIZE = 2
    hx = {"HTTP_HX_REQUEST": "true"}
    monkeypatch.setattr(tasks.dispatch_vacancy, "delay", lambda vacancy_id: None)  # no broker here
    if True:
        with time_machine.travel(NOW, tick=False):
            staff_web, admin_web = signed_in(staff), signed_in(admin)  # sessions made in the frozen time
            world = waitlist_world(clinic, staff)
            dead = dead_delivery_offer(world)
            stuck = dead_delivery_offer(world, starts_at=NOW.replace(day=5, hour=10))
            services.offer_claim(clinic=clinic, offer_ref=stuck.ref, expected_version=1, request_booking=True)
            review, _entry = review_vacancy(world, starts_at=NOW.replace(day=6, hour=10))
            bulk_reviews(world, 3)
            everyone = [*patients, *Patient.objects.filter(clinic=clinic)]
            page = reverse("console:waitlist", kwargs={"clinic_ref": clinic.ref})
            html = admin_web.get(page).content.decode()
            texts = [html, staff_web.get(page).content.decode()]
            texts.append(admin_web.get(page, HTTP_HX_TARGET="wl-readiness", **hx).content.decode())
            texts.append(admin_web.get(page, HTTP_HX_TARGET="wl-queue-rows", **hx).content.decode())
            more = re.search(r'hx-get="[^"]*\?after=([^"&]+)"', html)
            after = more.group(1)
            texts.append(admin_web.get(f"{page}?after={after}", **hx).content.decode())
            for vacancy_ref in (dead.vacancy.ref, stuck.vacancy.ref, review.ref):
                panel = reverse("console:waitlist-vacancy",
                                kwargs={"clinic_ref": clinic.ref, "vacancy_ref": vacancy_ref})
                texts += [admin_web.get(panel, **hx).content.decode(), staff_web.get(panel).content.decode()]

            def post(name, key, **kwargs):
                data = {"reason": "checked with the patient", "confirm": "on", "idempotency_key": key,
                        **kwargs.pop("data", {})}
                target = reverse(f"console:waitlist-{name}", kwargs={"clinic_ref": clinic.ref, **kwargs})
                response = admin_web.post(target, data, **hx)
                assert response.status_code == 200, response.content
                return response.content.decode() + response["HX-Trigger"]

            texts.append(post("withdraw", "p1", offer_ref=dead.ref))
            texts.append(post("retry-booking", "p2", hold_ref=stuck.hold.ref))
            texts.append(post("review", "p3", vacancy_ref=review.ref, data={"resolution": "PROMOTE"}))
            texts.append(post("redispatch", "p4", vacancy_ref=dead.vacancy.ref))
            texts.append(admin_web.get(reverse("console:audit", kwargs={"clinic_ref": clinic.ref})).content.decode())
    assert len(everyone) > len(patients) + 5
    for text in texts:
        assert_no_pii(text, everyone)
