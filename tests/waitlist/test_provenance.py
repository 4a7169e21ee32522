"""Reasons and provenance: decline reasons kept and shown, policy digest and decision expiry on offer
events, idempotency keys on ADMIN audit rows, reopen after a mistaken close, SKIP LOCKED pass-overs."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from common.models import AuditEntry
from scheduling.models import Role
from tests import factories as f
from tests.conftest import seoul, token_client
from tests.waitlist.loop_helpers import CSRF, claim_path, make_offer, open_vacancy, page_client
from waitlist import services
from waitlist.models import DispatchNote, OfferEvent, OfferStatus


def test_the_api_decline_reason_is_stored_and_shown(world, staff_api):
    from scheduling.models import Role
    from tests import factories as f
    from tests.conftest import token_client

    offer = make_offer(world)
    base = f"/api/v1/clinics/{world.clinic.ref}/offers/{offer.ref}"
    admin_api = token_client(f.user_with_role(world.clinic, Role.ADMIN))  # a decline on the patient's behalf
    response = admin_api.post(f"{base}/decline", {"reason": "TIME_NOT_SUITABLE"}, format="json")
    assert response.status_code == 200 and response.json()["decline_reason"] == "TIME_NOT_SUITABLE"
    shown = staff_api.get(base).json()
    assert (shown["status"], shown["decline_reason"]) == ("DECLINED", "TIME_NOT_SUITABLE")
    assert OfferEvent.objects.get(offer=offer, reason_code="DECLINED").detail == {
        "decline_reason": "TIME_NOT_SUITABLE"}


def test_the_claim_page_decline_reason_is_stored_and_shown(world):
    offer = make_offer(world, world.patient(language="en"))
    client = page_client()
    page = client.get(claim_path(offer))
    token = CSRF.search(page.content.decode()).group(1)
    response = client.post(claim_path(offer), {"csrfmiddlewaretoken": token, "action": "decline",
                                               "reason": "NO_LONGER_NEEDED"})
    assert response.status_code == 200
    assert "I no longer need this appointment" in response.content.decode()
    offer.refresh_from_db()
    assert (offer.status, offer.decline_reason) == (OfferStatus.DECLINED, "NO_LONGER_NEEDED")


def test_the_matched_event_carries_the_policy_digest_and_the_decision_expiry(world):
    offer = make_offer(world)
    detail = OfferEvent.objects.get(offer=offer, reason_code="MATCHED").detail
    assert detail["policy_digest"] == offer.policy.digest() == offer.policy_digest
    assert detail["decision_ref"] == offer.decision_ref
    assert detail["decision_expires_at"] == offer.decision_expires_at.isoformat()


def test_admin_audit_rows_carry_the_requests_idempotency_key(world):
    offer = make_offer(world)
    admin = token_client(f.user_with_role(world.clinic, Role.ADMIN))
    base = f"/api/v1/clinics/{world.clinic.ref}/vacancies/{offer.vacancy.ref}"
    assert admin.post(f"{base}/close", {"reason": "x"}, format="json",
                      HTTP_IDEMPOTENCY_KEY="close-1").status_code == 200
    assert admin.post(f"{base}/reopen", {"reason": "y"}, format="json",
                      HTTP_IDEMPOTENCY_KEY="reopen-1").status_code == 200
    keys = dict(AuditEntry.objects.filter(action__in=["waitlist.vacancy_close", "waitlist.vacancy_reopen"])
                .values_list("action", "idempotency_key"))
    assert keys == {"waitlist.vacancy_close": "close-1", "waitlist.vacancy_reopen": "reopen-1"}


def test_a_mistaken_close_does_not_bar_the_entry_after_a_reopen(world):
    offer = make_offer(world)
    admin = f.user_with_role(world.clinic, Role.ADMIN)
    services.vacancy_close(clinic=world.clinic, vacancy_ref=offer.vacancy.ref, actor=admin, reason="oops")
    services.vacancy_reopen(clinic=world.clinic, vacancy_ref=offer.vacancy.ref, actor=admin, reason="undo")
    again = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=offer.vacancy.ref)
    assert again.outcome == "OFFERED" and again.offer.entry_id == offer.entry_id
    assert again.offer.pk != offer.pk


def test_a_staff_withdrawal_still_bars_the_entry_from_that_vacancy(world):
    offer = make_offer(world)
    services.offer_withdraw(clinic=world.clinic, offer_ref=offer.ref, actor=world.staff, reason="wrong patient")
    again = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=offer.vacancy.ref)
    assert again.outcome == "NO_CANDIDATE"


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_a_skip_locked_pass_over_is_recorded():
    import time_machine

    from tests.waitlist.factories import NOW
    from tests.worlds import waitlist_world

    with time_machine.travel(NOW, tick=False):
        world = waitlist_world()
        busy = world.waiting(waiting_since=seoul(1, 7))
        other = world.waiting(waiting_since=seoul(1, 8))
        vacancy = open_vacancy(world)
        dsn = connection.settings_dict
        # Another transaction holds the first candidate's row (it is being promoted elsewhere).
        with psycopg.connect(host=dsn["HOST"], port=dsn["PORT"] or 5432, user=dsn["USER"],
                             dbname=dsn["NAME"], password=dsn["PASSWORD"] or None) as holder:
            holder.execute("SELECT 1 FROM waitlist_waitlistentry WHERE id = %s FOR UPDATE", [busy.pk])
            result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
            holder.rollback()
        assert result.outcome == "OFFERED" and result.offer.entry_id == other.pk
        note = DispatchNote.objects.get(vacancy=vacancy, entry=busy)
        assert note.reason_code == "ENTRY_LOCKED"
