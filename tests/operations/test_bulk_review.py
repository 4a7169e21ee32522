"""Bulk staff review: summary first (no change), then one review per vacancy through the single
review's service, each audited with its own key; per-row results; refusals stay per row."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from common.models import AuditEntry
from tests.operations.waitlist_helpers import bulk_reviews
from tests.worlds import waitlist_world
from waitlist.models import Offer, OfferStatus, VacancyStatus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]

HX = {"HTTP_HX_REQUEST": "true"}


def bulk(web, clinic, refs, *, confirm=False, resolution="PROMOTE", key="bulk-1", reason="decisions checked by phone"):
    data = {"vacancies": refs, "resolution": resolution, "reason": reason, "idempotency_key": key}
    if confirm:
        data["confirm"] = "on"
    return web.post(reverse("console:waitlist-review-bulk", kwargs={"clinic_ref": clinic.ref}), data, **HX)


def test_the_summary_lists_the_vacancies_and_changes_nothing(staff_web, world):
    vacancies = bulk_reviews(world, 3)
    response = bulk(staff_web, world.clinic, [v.ref for v in vacancies])
    html = response.content.decode()
    assert response.status_code == 200 and 'data-testid="bulk-summary"' in html
    assert all(v.ref in html for v in vacancies) and world.doctor.name in html
    assert 'name="confirm" value="on"' in html
    # The setup's decision records are audited (system:decision-feed); the summary itself writes nothing.
    assert not Offer.objects.exists()
    assert not AuditEntry.objects.filter(action="waitlist.vacancy_review_resolve").exists()


def test_confirm_promotes_three_vacancies_each_audited_with_its_own_key(staff_web, staff, world):
    vacancies = bulk_reviews(world, 3)
    response = bulk(staff_web, world.clinic, [v.ref for v in vacancies], confirm=True)
    html = response.content.decode()
    assert html.count('data-ok="true"') == 3
    assert Offer.objects.filter(vacancy__in=vacancies, status=OfferStatus.OFFERED).count() == 3
    audits = AuditEntry.objects.filter(action="waitlist.vacancy_review_resolve")
    assert sorted(a.target_ref for a in audits) == sorted(v.ref for v in vacancies)
    assert {a.idempotency_key for a in audits} == {f"bulk-1:{v.ref}" for v in vacancies}
    assert {a.actor_id for a in audits} == {staff.pk}
    assert "waitlist-changed" in json.loads(response["HX-Trigger"])


def test_a_refused_row_does_not_stop_the_others(staff_web, world):
    vacancies = bulk_reviews(world, 2)
    foreign = bulk_reviews(waitlist_world(waitlist_world().clinic, world.staff), 1)[0]
    type(vacancies[0]).objects.filter(pk=vacancies[0].pk).update(status=VacancyStatus.CLOSED)
    refs = [vacancies[0].ref, vacancies[1].ref, foreign.ref]
    html = bulk(staff_web, world.clinic, refs, confirm=True).content.decode()
    assert html.count('data-ok="true"') == 1 and html.count('data-ok="false"') == 2
    assert "VACANCY_NOT_IN_REVIEW" in html and "NOT_FOUND" in html
    assert not Offer.objects.filter(vacancy=foreign).exists()


def test_a_double_submit_replays_every_row(staff_web, world):
    vacancies = bulk_reviews(world, 2)
    refs = [v.ref for v in vacancies]
    bulk(staff_web, world.clinic, refs, confirm=True, resolution="SKIP")
    again = bulk(staff_web, world.clinic, refs, confirm=True, resolution="SKIP").content.decode()
    assert again.count("(replayed)") == 2
    assert AuditEntry.objects.filter(action="waitlist.vacancy_review_resolve").count() == 2


def test_bulk_without_a_selection_or_reason_is_refused(staff_web, world):
    assert bulk(staff_web, world.clinic, []).status_code == 400
    assert bulk(staff_web, world.clinic, [bulk_reviews(world, 1)[0].ref], reason="x").status_code == 400


def test_outsider_gets_404(outsider_web, world):
    vacancy = bulk_reviews(world, 1)[0]
    assert bulk(outsider_web, world.clinic, [vacancy.ref], confirm=True).status_code == 404
    assert not Offer.objects.exists()


def test_the_vacancy_list_offers_checkboxes_for_review_rows_only(staff_web, world):
    review = bulk_reviews(world, 1)[0]
    html = staff_web.get(
        reverse("console:waitlist-list", kwargs={"clinic_ref": world.clinic.ref, "kind": "vacancies"})
    ).content.decode()
    assert html.count('data-testid="bulk-select"') == 1 and f'value="{review.ref}" form="bulk-review"' in html
