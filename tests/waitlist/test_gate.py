"""Decision gate (REQUIRED / NOT_USED), review re-dispatch on a FRESH decision, the trusted decision feed,
priority from decisions and ADMIN-only priority edits, and policy validation."""

from __future__ import annotations

from datetime import timedelta

import pytest

from common.errors import ValidationFailed
from common.models import AuditEntry
from scheduling.models import AppointmentStatus, Role
from tests import factories as f
from tests.conftest import seoul, token_client
from tests.waitlist.factories import NOW, decide, integration_client
from tests.waitlist.loop_helpers import open_vacancy, review_vacancy
from waitlist import services
from waitlist.figures.operations import ops_snapshot
from waitlist.models import DecisionStatus, OfferEvent, VacancyStatus, WaitlistPolicy


def test_a_clinic_with_decision_gate_not_used_fills_without_any_decision(world):
    services.policy_publish(clinic=world.clinic, decision_gate="NOT_USED")
    entry = world.waiting(fresh=False)  # no decision was ever recorded
    vacancy = open_vacancy(world)
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == entry.pk
    offer = result.offer
    assert (offer.decision_status, offer.decision_ref, offer.decision_expires_at) == ("NOT_USED", "", None)
    assert OfferEvent.objects.get(offer=offer, reason_code="MATCHED").detail["decision_status"] == "NOT_USED"
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=offer.version)
    appointment, _ = services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref)
    assert appointment.status == AppointmentStatus.CONFIRMED


def test_with_the_gate_required_a_missing_decision_still_goes_to_review(world):
    world.waiting(fresh=False)
    vacancy = open_vacancy(world)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "STAFF_REVIEW"


def test_a_review_vacancy_redispatches_by_itself_when_a_fresh_decision_arrives(world, queued_dispatches, on_commit):
    vacancy, entry = review_vacancy(world)
    with on_commit(execute=True):
        decide(entry.patient, DecisionStatus.FRESH, ref="rel-fresh-after-review")
    assert queued_dispatches == [vacancy.pk]  # the fast path, after commit
    # Reconcile is the backstop: it picks the REVIEW vacancy up because its candidate is FRESH now.
    assert services.reconcile_run()["dispatch"] == {"OFFERED": 1}
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.OPEN
    assert vacancy.offers.get().entry_id == entry.pk


def test_switching_the_gate_off_redispatches_review_vacancies(world, queued_dispatches, on_commit):
    vacancy, entry = review_vacancy(world)
    assert services.reconcile_run()["dispatch"] == {}  # still a review: reconcile leaves it to staff
    with on_commit(execute=True):
        services.policy_publish(clinic=world.clinic, decision_gate="NOT_USED")
    assert queued_dispatches == [vacancy.pk]
    assert services.reconcile_run()["dispatch"] == {"OFFERED": 1}
    assert vacancy.offers.get().decision_status == "NOT_USED"


def test_readiness_warns_when_no_decision_arrived_for_waiting_patients_in_24_hours(world, frozen_clock):
    world.waiting()  # its decision was recorded now
    assert ops_snapshot(clinic=world.clinic)["readiness"]["warnings"] == []
    frozen_clock.move_to(NOW + timedelta(hours=25))
    assert ops_snapshot(clinic=world.clinic)["readiness"]["warnings"] == ["DECISION_FEED_SILENT"]
    services.policy_publish(clinic=world.clinic, decision_gate="NOT_USED")
    assert ops_snapshot(clinic=world.clinic)["readiness"]["warnings"] == []


def test_only_the_integration_credential_may_feed_decisions_and_each_write_is_audited(world, staff_api):
    base = f"/api/v1/clinics/{world.clinic.ref}/booking-decisions/"
    patient = world.patient()
    body = {"patient": patient.ref, "decision_ref": "rel-7", "status": "FRESH",
            "expires_at": (NOW + timedelta(hours=1)).isoformat(), "priority_rank": 5}
    assert staff_api.post(base, body, format="json").status_code == 403
    admin = token_client(f.user_with_role(world.clinic, Role.ADMIN))
    assert admin.post(base, body, format="json").status_code == 403
    other_feed = integration_client(f.ClinicFactory())
    assert other_feed.post(base, body, format="json").status_code == 404  # out of scope looks missing
    assert not AuditEntry.objects.filter(action="waitlist.decision_record").exists()

    feed = integration_client(world.clinic)
    response = feed.post(base, body, format="json", HTTP_IDEMPOTENCY_KEY="feed-1")
    assert response.status_code == 201
    audit = AuditEntry.objects.get(action="waitlist.decision_record")
    assert audit.actor_label == feed.user.get_username() and audit.idempotency_key == "feed-1"
    assert audit.result["decision_ref"] == "rel-7" and audit.result["priority_rank"] == 5


def test_the_decisions_priority_rank_is_the_order_the_matcher_uses(world):
    first = world.waiting(fresh=False, waiting_since=seoul(1, 7))
    ranked = world.waiting(fresh=False, waiting_since=seoul(1, 8))
    decide(first.patient, rank=0)
    decide(ranked.patient, rank=10)
    ranked.refresh_from_db()
    assert ranked.priority_rank == 10
    vacancy = open_vacancy(world)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer.entry_id == ranked.pk


def test_priority_edits_are_admin_only_and_audited(world, staff_api):
    entry = world.waiting()
    url = f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/{entry.ref}/priority"
    body = {"priority_rank": 7, "reason": "clinical urgency"}
    assert staff_api.post(url, body, format="json").status_code == 403
    create = {"patient": world.patient().ref, "treatment": world.treatment.ref, "earliest": "2030-12-02",
              "latest": "2030-12-05", "priority_rank": 3}
    assert staff_api.post(f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/", create,
                          format="json").status_code == 403
    admin = token_client(f.user_with_role(world.clinic, Role.ADMIN))
    response = admin.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="prio-1")
    assert response.status_code == 200
    entry.refresh_from_db()
    assert entry.priority_rank == 7
    audit = AuditEntry.objects.get(action="waitlist.entry_priority")
    assert audit.result["from"] == 0 and audit.result["to"] == 7 and audit.idempotency_key == "prio-1"
    assert audit.reason == "clinical urgency"


@pytest.mark.parametrize(
    ("fields", "bad"),
    [
        ({"decision_gate": "SOMETIMES"}, "decision_gate"),
        ({"confirmation": "NEVER"}, "confirmation"),
        ({"quiet_hours_start": "21:00"}, "quiet_hours"),
        ({"quiet_hours_start": "25:00", "quiet_hours_end": "08:00"}, "quiet_hours_start"),
        ({"contact_cap_per_day": 0}, "contact_cap_per_day"),
        ({"hold_minutes": 0}, "hold_minutes"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_policy_publish_refuses_bad_values_and_writes_nothing(world, fields, bad):
    services.policy_current(clinic=world.clinic)
    with pytest.raises(ValidationFailed) as info:
        services.policy_publish(clinic=world.clinic, **fields)
    assert bad in info.value.fields
    assert WaitlistPolicy.objects.filter(clinic=world.clinic).count() == 1


def test_policy_publish_converts_text_times_and_changes_the_digest(world):
    before = services.policy_current(clinic=world.clinic)
    policy = services.policy_publish(clinic=world.clinic, quiet_hours_start="21:00", quiet_hours_end="08:00",
                                     confirmation="BOOKING_COMMAND")
    assert policy.version == before.version + 1 and str(policy.quiet_hours_start) == "21:00:00"
    assert policy.digest() != before.digest()


def test_the_feed_credential_command_makes_a_user_that_can_only_feed_decisions(world):
    from io import StringIO

    from django.core.management import call_command
    from rest_framework.test import APIClient

    out = StringIO()
    call_command("waitlist_decision_feed", "--clinic", world.clinic.ref, "--username", "reliability", stdout=out)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {out.getvalue().strip()}")
    body = {"patient": world.patient().ref, "decision_ref": "rel-cmd", "status": "FRESH",
            "expires_at": (NOW + timedelta(hours=1)).isoformat()}
    base = f"/api/v1/clinics/{world.clinic.ref}"
    assert client.post(f"{base}/booking-decisions/", body, format="json").status_code == 201
    assert client.get(f"{base}/offers/off_x").status_code == 404  # no STAFF role: the clinic looks missing
