"""Console lists (vacancies, offers, the waiting list, finished jobs) and the overview counters:
filters, keyset paging, names beside refs, no patient data, constant query counts, cheap polls."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from reevaluation.models import JobState, ReevaluationJob
from tests.conftest import assert_no_pii, seoul
from tests.operations.waitlist_helpers import bulk_reviews, bulk_vacancies, make_offer
from tests.reevaluation.factories import bulk_jobs
from tests.waitlist.factories import WaitlistEntryFactory
from waitlist.models import EntryStatus, OfferStatus, VacancyStatus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]

HX = {"HTTP_HX_REQUEST": "true"}


def list_url(clinic, kind, **params):
    base = (
        reverse("console:reevaluation-finished", kwargs={"clinic_ref": clinic.ref}) if kind == "jobs"
        else reverse("console:waitlist-list", kwargs={"clinic_ref": clinic.ref, "kind": kind})
    )
    return base + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def row_refs(html: str) -> list[str]:
    return re.findall(r'<tr data-ref="([^"]+)"', html)


def finished_jobs(clinic, n, *, state=JobState.FAILED, code="ASSESSMENT_TIMEOUT", outcomes=None):
    jobs = bulk_jobs(clinic, n)
    ReevaluationJob.objects.filter(pk__in=[j.pk for j in jobs]).update(
        state=state, finished_at=timezone.now(), last_failure_code=code if state == JobState.FAILED else "",
        outcome_counts=outcomes or {},
    )
    return jobs


# --- vacancies ----------------------------------------------------------------------------------------


def test_vacancy_list_filters_by_state_and_shows_names_beside_refs(staff_web, world):
    reviews = bulk_reviews(world, 2)
    bulk_vacancies(world, 4)
    html = staff_web.get(list_url(world.clinic, "vacancies", status="REVIEW")).content.decode()
    assert set(row_refs(html)) == {v.ref for v in reviews}
    assert world.doctor.name in html and world.treatment.name in html


def test_vacancy_list_filters_by_practitioner_treatment_and_slot_day(staff_web, world):
    offer = make_offer(world, starts_at=seoul(4, 10))
    bulk_vacancies(world, 2)  # the other day (5th)
    by_day = row_refs(staff_web.get(list_url(world.clinic, "vacancies", date="2030-12-04")).content.decode())
    assert by_day == [offer.vacancy.ref]
    other = world.other_treatment.ref
    assert row_refs(staff_web.get(list_url(world.clinic, "vacancies", treatment=other)).content.decode()) == []
    by_doctor = list_url(world.clinic, "vacancies", practitioner=world.doctor.ref)
    doctor = row_refs(staff_web.get(by_doctor).content.decode())
    assert offer.vacancy.ref in doctor


def test_an_unknown_filter_value_is_a_400(staff_web, world):
    assert staff_web.get(list_url(world.clinic, "vacancies", status="NOPE")).status_code == 400
    assert staff_web.get(list_url(world.clinic, "vacancies", practitioner="pr_foreign")).status_code == 400


def test_vacancy_list_load_more_walks_every_row_once(staff_web, world, settings):
    settings.CONSOLE_LIST_PAGE_SIZE = 3
    bulk_vacancies(world, 7)
    html = staff_web.get(list_url(world.clinic, "vacancies")).content.decode()
    seen = row_refs(html)
    while (match := re.search(r'hx-get="[^"]*after=([^"&]+)"', html)):
        html = staff_web.get(list_url(world.clinic, "vacancies", after=match.group(1)), **HX).content.decode()
        seen += row_refs(html)
    assert len(seen) == len(set(seen)) == 7


@pytest.mark.parametrize("kind", ["vacancies", "offers", "entries", "jobs"])
def test_list_query_count_stays_constant_as_the_clinic_grows(staff_web, world, kind):
    def grow(n, start):
        bulk_vacancies(world, n, start=start)
        for i in range(n):
            make_offer(world, starts_at=seoul(6, 8) + timedelta(minutes=30 * (start + i)))
        finished_jobs(world.clinic, n, outcomes={"HOLD_KEPT": 1})

    def count():
        with CaptureQueriesContext(connection) as queries:
            assert staff_web.get(list_url(world.clinic, kind)).status_code == 200
        return len(queries)

    grow(2, 0)
    small = count()
    grow(12, 50)
    assert count() == small


# --- offers, entries, jobs -------------------------------------------------------------------------------


def test_offer_list_shows_active_offers_with_a_countdown(staff_web, world):
    active = make_offer(world, starts_at=seoul(4, 10))
    expired = make_offer(world, starts_at=seoul(4, 12))
    type(expired).objects.filter(pk=expired.pk).update(status=OfferStatus.EXPIRED)
    html = staff_web.get(list_url(world.clinic, "offers", status="ACTIVE")).content.decode()
    assert row_refs(html) == [active.ref] and "data-countdown" in html
    expired_html = staff_web.get(list_url(world.clinic, "offers", status="EXPIRED")).content.decode()
    assert row_refs(expired_html) == [expired.ref]


def test_waiting_list_shows_band_and_window_but_no_patient_data(staff_web, world):
    high = WaitlistEntryFactory(clinic=world.clinic, treatment=world.treatment, priority_rank=5)
    withdrawn = WaitlistEntryFactory(clinic=world.clinic, treatment=world.treatment, status=EntryStatus.WITHDRAWN)
    html = staff_web.get(list_url(world.clinic, "entries", status="WAITING")).content.decode()
    assert row_refs(html) == [high.ref] and "HIGH" in html and world.treatment.name in html
    assert_no_pii(html, [high.patient, withdrawn.patient])


def test_finished_jobs_filter_by_state_outcome_and_failure_code(staff_web, world):
    failed = finished_jobs(world.clinic, 2, code="HASH_MISMATCH")
    completed = finished_jobs(world.clinic, 1, state=JobState.COMPLETED, outcomes={"HOLD_KEPT": 2})
    bulk_jobs(world.clinic, 3)  # PENDING: not finished
    clinic = world.clinic
    assert set(row_refs(staff_web.get(list_url(clinic, "jobs")).content.decode())) == {
        j.ref for j in failed + completed}
    assert row_refs(staff_web.get(list_url(clinic, "jobs", outcome="HOLD_KEPT")).content.decode()) == [
        completed[0].ref]
    by_code = row_refs(staff_web.get(list_url(clinic, "jobs", failure_code="HASH_MISMATCH")).content.decode())
    assert set(by_code) == {j.ref for j in failed}
    assert row_refs(staff_web.get(list_url(clinic, "jobs", status="COMPLETED")).content.decode()) == [
        completed[0].ref]


def test_lists_of_another_clinic_are_404(staff_web, other_tenant_clinic):
    assert staff_web.get(list_url(other_tenant_clinic, "vacancies")).status_code == 404
    assert staff_web.get(list_url(other_tenant_clinic, "jobs")).status_code == 404


# --- polls and the overview ---------------------------------------------------------------------------


def test_an_unchanged_poll_answers_304_without_reading_the_list(staff_web, world):
    bulk_vacancies(world, 3)
    poll = {"HTTP_X_CONSOLE_POLL": "1", **HX}
    first = staff_web.get(list_url(world.clinic, "vacancies", poll=1), **poll)
    etag = first["ETag"]
    with CaptureQueriesContext(connection) as queries:
        again = staff_web.get(list_url(world.clinic, "vacancies", poll=1), HTTP_IF_NONE_MATCH=etag, **poll)
    assert again.status_code == 304
    assert len(queries) < 6  # session, user, clinic scope and the one version query


def test_a_poll_after_a_change_answers_the_new_list(staff_web, world):
    bulk_vacancies(world, 1)
    poll = {"HTTP_X_CONSOLE_POLL": "1", **HX}
    etag = staff_web.get(list_url(world.clinic, "vacancies", poll=1), **poll)["ETag"]
    reviews = bulk_reviews(world, 1)
    changed = staff_web.get(list_url(world.clinic, "vacancies", poll=1), HTTP_IF_NONE_MATCH=etag, **poll)
    assert changed.status_code == 200 and reviews[0].ref in changed.content.decode()


def test_overview_counts_attention_and_live_items_with_links(staff_web, world):
    make_offer(world, starts_at=seoul(4, 10))
    bulk_reviews(world, 2)
    finished_jobs(world.clinic, 1)
    html = staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": world.clinic.ref})).content.decode()

    def counter(key):
        return re.search(rf'data-counter="{key}">\s*<dt>[^<]*</dt>\s*<dd><a href="([^"]+)">(\d+)</a>', html).groups()

    assert counter("review") == (list_url(world.clinic, "vacancies", status="REVIEW"), "2")
    assert counter("offers")[1] == "1" and counter("failed")[1] == "1"
    assert counter("open")[1] == str(
        world.clinic.vacancies.filter(status=VacancyStatus.OPEN).count())


def test_the_offer_list_marks_a_booking_made_under_standing_acceptance(staff_web, world):
    from tests.waitlist.loop_helpers import open_vacancy
    from waitlist import services

    entry = world.waiting()
    services.standing_acceptance_record(clinic=world.clinic, entry_ref=entry.ref, state="GRANTED", source="API")
    vacancy = open_vacancy(world, seoul(3, 10))
    booked = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    ordinary = make_offer(world, starts_at=seoul(4, 10))
    html = staff_web.get(list_url(world.clinic, "offers")).content.decode()
    rows = dict(re.findall(r'<tr data-ref="([^"]+)"(.*?)</tr>', html, re.S))
    assert "Auto-booked" in rows[booked.offer.ref] and "Auto-booked" not in rows[ordinary.ref]
