"""Staff review of a REVIEW vacancy (``vacancy_review_resolve``): PROMOTE, SKIP, refusals, API."""

from __future__ import annotations

import pytest

from common.errors import Conflict, NotFound, ValidationFailed, VersionConflict
from common.models import AuditEntry, OutboxMessage
from scheduling.models import HoldStatus, Role
from tests import factories as f
from tests.conftest import seoul, token_client
from tests.waitlist.factories import decide
from tests.waitlist.loop_helpers import make_offer, review_vacancy
from waitlist import services
from waitlist.models import DecisionStatus, EntryStatus, Offer, OfferEvent, OfferStatus, VacancyStatus


def resolve(world, vacancy, resolution="PROMOTE", **kw):
    kw.setdefault("actor", world.staff)
    kw.setdefault("reason", "decision service is lagging")
    return services.vacancy_review_resolve(clinic=world.clinic, vacancy_ref=vacancy.ref, resolution=resolution, **kw)


def test_promote_offers_the_reviewed_candidate_and_records_the_review(world):
    vacancy, entry = review_vacancy(world)
    result = resolve(world, vacancy, correlation_id="corr-review-1")
    assert result.outcome == "OFFERED" and result.resolution == "PROMOTE" and result.reviewed_entry == entry.ref
    offer = result.offer
    assert offer.entry_id == entry.pk and offer.status == OfferStatus.OFFERED
    assert offer.hold.status == HoldStatus.ACTIVE
    entry.refresh_from_db()
    assert entry.status == EntryStatus.OFFERED
    assert result.vacancy.status == VacancyStatus.OPEN and result.vacancy.review_entry_id is None
    assert result.vacancy.version == vacancy.version + 1
    events = list(OfferEvent.objects.filter(offer=offer).order_by("id").values_list("reason_code", "actor"))
    assert events == [("MATCHED", world.staff.username), ("STAFF_REVIEWED", world.staff.username)]
    reviewed = OfferEvent.objects.get(offer=offer, reason_code="STAFF_REVIEWED")
    assert reviewed.correlation_id == "corr-review-1"
    assert reviewed.detail["reviewed_decision_status"] == "STALE" and reviewed.detail["resolution"] == "PROMOTE"
    audit = AuditEntry.objects.get(action="waitlist.vacancy_review_resolve")
    assert audit.actor == world.staff and audit.reason == "decision service is lagging"
    assert audit.correlation_id == "corr-review-1" and audit.result["offer"] == offer.ref
    assert OutboxMessage.objects.filter(aggregate_ref=offer.ref).count() == 1  # the patient is notified
    # The offer records the decision as it really was, and that staff vouched for it.
    assert offer.staff_reviewed and offer.decision_status == "STALE"
    # Staff review stands in for freshness: the patient can claim the offer.
    receipt = services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=offer.version)
    assert receipt.body["status"] == "ACCEPTED"


def test_a_newer_stale_decision_still_wins_at_claim_time(world):
    vacancy, entry = review_vacancy(world)
    offer = resolve(world, vacancy).offer
    decide(entry.patient, DecisionStatus.UNAVAILABLE, ref="dec-newer")
    with pytest.raises(Conflict) as refused:
        services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=offer.version)
    assert refused.value.code == "DECISION_STALE"


def test_skip_passes_over_the_candidate_and_offers_the_next(world, queued_dispatches):
    vacancy, stale = review_vacancy(world, priority_rank=5)
    fresh = world.waiting(priority_rank=1)
    result = resolve(world, vacancy, "SKIP")
    assert result.outcome == "OFFERED" and result.offer.entry_id == fresh.pk
    stale.refresh_from_db()
    assert stale.status == EntryStatus.WAITING and stale.suppressed_until is None  # only this vacancy
    assert [e.reason_code for e in OfferEvent.objects.filter(offer=result.offer).order_by("id")] == [
        "MATCHED", "STAFF_REVIEWED"]
    audit = AuditEntry.objects.get(action="waitlist.vacancy_review_resolve")
    assert audit.result["resolution"] == "SKIP" and audit.result["entry"] == stale.ref
    assert audit.result["outcome"] == "OFFERED"


def test_skip_to_another_stale_candidate_goes_back_to_review_with_that_one(world):
    vacancy, first = review_vacancy(world, priority_rank=5)
    second = world.waiting(fresh=False, priority_rank=1)
    decide(second.patient, DecisionStatus.STALE)
    result = resolve(world, vacancy, "SKIP")
    assert result.outcome == "STAFF_REVIEW" and result.offer is None
    assert result.vacancy.status == VacancyStatus.REVIEW and result.vacancy.review_entry_id == second.pk


def test_a_skipped_candidate_is_never_offered_that_vacancy_again(world):
    vacancy, skipped = review_vacancy(world)
    assert resolve(world, vacancy, "SKIP").outcome == "NO_CANDIDATE"
    skipped.refresh_from_db()
    assert skipped.status == EntryStatus.WAITING  # still waiting for other vacancies
    again = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert again.outcome == "NO_CANDIDATE" and not Offer.objects.filter(entry=skipped).exists()


def test_skip_the_last_candidate_leaves_the_vacancy_open_and_exhausted(world):
    vacancy, _entry = review_vacancy(world)
    result = resolve(world, vacancy, "SKIP")
    assert result.outcome == "NO_CANDIDATE"
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.OPEN and vacancy.exhausted_at is not None
    assert not Offer.objects.exists()


def test_wrong_state_is_a_typed_conflict_and_changes_nothing(world):
    offer = make_offer(world)
    with pytest.raises(Conflict) as refused:
        resolve(world, offer.vacancy)
    assert refused.value.code == "VACANCY_NOT_IN_REVIEW" and refused.value.status_code == 409
    vacancy, _entry = review_vacancy(world, starts_at=seoul(4, 10))
    resolve(world, vacancy)
    with pytest.raises(Conflict) as again:  # resolved once: a second resolution is refused
        resolve(world, vacancy, "SKIP")
    assert again.value.code == "VACANCY_NOT_IN_REVIEW"
    assert AuditEntry.objects.filter(action="waitlist.vacancy_review_resolve").count() == 1


def test_stale_copy_version_conflict_changes_nothing(world):
    vacancy, entry = review_vacancy(world)
    with pytest.raises(VersionConflict):
        resolve(world, vacancy, expected_version=vacancy.version - 1)
    vacancy.refresh_from_db()
    entry.refresh_from_db()
    assert vacancy.status == VacancyStatus.REVIEW and entry.status == EntryStatus.WAITING
    assert not Offer.objects.exists() and not AuditEntry.objects.filter(action__contains="review_resolve").exists()
    assert resolve(world, vacancy, expected_version=vacancy.version).outcome == "OFFERED"


def test_an_ineligible_candidate_cannot_be_promoted(world):
    vacancy, entry = review_vacancy(world)
    services.entry_withdraw(clinic=world.clinic, entry_ref=entry.ref, actor=None, reason="moved away")
    with pytest.raises(Conflict) as refused:
        resolve(world, vacancy)
    assert refused.value.code == "CANDIDATE_INELIGIBLE" and "ENTRY_NOT_WAITING" in refused.value.detail
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.REVIEW


def test_started_vacancy_and_scope(world, frozen_clock):
    vacancy, _entry = review_vacancy(world, starts_at=seoul(1, 13), earliest=seoul(1, 0))
    other = make_world_other()
    with pytest.raises(NotFound):
        services.vacancy_review_resolve(clinic=other, vacancy_ref=vacancy.ref, actor=None, reason="x",
                                        resolution="PROMOTE")
    with pytest.raises(NotFound):
        resolve(world, type("V", (), {"ref": "vac_nope"})())
    with pytest.raises(ValidationFailed):
        resolve(world, vacancy, "MAYBE")
    frozen_clock.move_to(seoul(1, 13))
    with pytest.raises(Conflict) as refused:
        resolve(world, vacancy)
    assert refused.value.code == "VACANCY_STARTED"


def make_world_other():
    return f.ClinicFactory(timezone="Asia/Seoul")


# --- API: POST /clinics/{c}/vacancies/{ref}/review (I) --------------------------------------------


def review_url(world, vacancy) -> str:
    return f"/api/v1/clinics/{world.clinic.ref}/vacancies/{vacancy.ref}/review"


def test_api_review_promote_with_idempotency_and_actor_from_the_token(world, staff_api):
    vacancy, entry = review_vacancy(world)
    body = {"resolution": "PROMOTE", "reason": "checked by phone", "actor": "someone-else"}
    response = staff_api.post(review_url(world, vacancy), body, format="json", HTTP_IDEMPOTENCY_KEY="rv-1")
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["outcome"] == "OFFERED" and data["reviewed_entry"] == entry.ref and data["correlation_id"]
    assert data["status"] == "OPEN" and data["offer"]
    replay = staff_api.post(review_url(world, vacancy), body, format="json", HTTP_IDEMPOTENCY_KEY="rv-1")
    assert replay.content == response.content and replay["Idempotent-Replayed"] == "true"
    assert Offer.objects.count() == 1
    audit = AuditEntry.objects.get(action="waitlist.vacancy_review_resolve")
    assert audit.actor == world.staff and audit.actor_label == world.staff.username
    conflict = staff_api.post(review_url(world, vacancy), {"resolution": "SKIP", "reason": "again"}, format="json")
    assert conflict.status_code == 409 and conflict.json()["code"] == "VACANCY_NOT_IN_REVIEW"


def test_api_review_refusals(world, staff_api):
    vacancy, _entry = review_vacancy(world)
    url = review_url(world, vacancy)
    assert staff_api.post(url, {"resolution": "PROMOTE"}, format="json").status_code == 400
    assert staff_api.post(url, {"resolution": "NOPE", "reason": "x"}, format="json").status_code == 400
    assert token_client().post(url, {"resolution": "SKIP", "reason": "x"}, format="json").status_code == 401
    outsider = token_client(f.user_with_role(f.ClinicFactory(), Role.ADMIN))
    assert outsider.post(url, {"resolution": "SKIP", "reason": "x"}, format="json").status_code == 404
    missing = f"/api/v1/clinics/{world.clinic.ref}/vacancies/vac_nope/review"
    assert staff_api.post(missing, {"resolution": "SKIP", "reason": "x"}, format="json").status_code == 404
    stale = staff_api.post(url, {"resolution": "SKIP", "reason": "x", "expected_version": 1}, format="json")
    assert stale.status_code == 409 and stale.json()["code"] == "VERSION_CONFLICT"
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.REVIEW
    assert staff_api.get(url).status_code == 405


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_two_staff_resolving_one_review_at_once_make_one_offer():
    import time_machine

    from common.errors import DomainError
    from tests.conftest import race
    from tests.waitlist.factories import NOW
    from tests.worlds import waitlist_world

    with time_machine.travel(NOW, tick=False):
        world = waitlist_world()
        vacancy, _entry = review_vacancy(world)
        world.waiting(priority_rank=-1)  # a FRESH second candidate for the SKIP side

        def work(i):
            try:
                return resolve(world, vacancy, ("PROMOTE", "SKIP")[i]).outcome
            except DomainError as exc:
                return exc.code

        results = race(work, 2)
    assert sorted(results, key=str).count("VACANCY_NOT_IN_REVIEW") == 1, results
    assert "OFFERED" in results
    assert Offer.objects.filter(vacancy=vacancy, status=OfferStatus.OFFERED).count() == 1
    assert AuditEntry.objects.filter(action="waitlist.vacancy_review_resolve").count() == 1
