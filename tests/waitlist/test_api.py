"""The Waitlist section of API.md: shapes, error codes, scope and the permission checklist."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.models import Role
from tests import factories as f
from tests.conftest import seoul, token_client
from tests.waitlist.factories import NOW
from tests.worlds import waitlist_world
from waitlist.models import EntryStatus, Offer, OfferStatus, WaitlistEntry


def post(client, url, body=None, key=None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(url, body or {}, format="json", **headers)


@pytest.fixture
def admin_api(world):
    return token_client(f.user_with_role(world.clinic, Role.ADMIN, username="wl-api-admin"))


@pytest.fixture
def base(world):
    return f"/api/v1/clinics/{world.clinic.ref}"


@pytest.fixture
def offer(world, staff_api, base):
    world.waiting(practitioner=world.doctor)
    appointment = world.confirmed(seoul(3, 10))
    vacancy = post(staff_api, f"{base}/appointments/{appointment.ref}/cancel", {"reason": "x"}).json()[
        "vacancy"
    ]
    return Offer.objects.get(ref=post(staff_api, f"{base}/vacancies/{vacancy}/dispatch").json()["offer"])


def test_entry_create_detail_and_withdraw(world, staff_api, base):
    patient = world.patient()
    body = {
        "patient": patient.ref,
        "treatment": world.treatment.ref,
        "practitioner": world.doctor.ref,
        "earliest": "2030-12-03T09:00:00+09:00",
        "latest": "2030-12-03T18:00:00+09:00",
        "priority_rank": 0,  # a non-zero rank is an ADMIN priority edit (test_gate)
    }
    created = post(staff_api, f"{base}/waitlist-entries/", body, key="e1")
    assert created.status_code == 201, created.content
    entry = created.json()
    assert entry["status"] == "WAITING" and entry["version"] == 1
    assert entry["waiting_since"] == NOW.isoformat() and entry["practitioner"] == world.doctor.ref
    assert "id" not in entry and patient.display_name not in created.content.decode()
    assert post(staff_api, f"{base}/waitlist-entries/", body, key="e1").json() == entry  # replay
    assert staff_api.get(f"{base}/waitlist-entries/{entry['ref']}").json() == {**entry, "standing_acceptance": None}
    withdrawn = post(staff_api, f"{base}/waitlist-entries/{entry['ref']}/withdraw", {"reason": "better slot"})
    assert withdrawn.status_code == 200 and withdrawn.json()["status"] == "WITHDRAWN"
    stale = post(
        staff_api, f"{base}/waitlist-entries/{entry['ref']}/withdraw", {"reason": "x", "expected_version": 1}
    )
    assert stale.status_code == 200  # already withdrawn: a no-op answer, not an error


@pytest.mark.parametrize(
    "change, field",
    [
        ({"patient": "pt_nope"}, "patient"),
        ({"earliest": "soon"}, "earliest"),
        ({"earliest": "2030-12-03T09:00:00"}, "earliest"),  # no offset
        ({"latest": "2030-12-03T08:00:00+09:00"}, "latest"),  # before earliest
        ({"treatment": None}, "treatment"),
    ],
)
def test_entry_create_validation(world, staff_api, base, change, field):
    body = {
        "patient": world.patient().ref,
        "treatment": world.treatment.ref,
        "earliest": "2030-12-03T09:00:00+09:00",
        "latest": "2030-12-03T18:00:00+09:00",
        **change,
    }
    response = post(staff_api, f"{base}/waitlist-entries/", body)
    assert response.status_code == 400 and response.json()["code"] == "VALIDATION_ERROR"
    assert field in response.json()["fields"]
    assert not WaitlistEntry.objects.exists()


def test_offer_and_vacancy_detail(world, staff_api, base, offer):
    body = staff_api.get(f"{base}/offers/{offer.ref}").json()
    assert {k: body[k] for k in ("ref", "status", "version", "vacancy", "entry", "hold", "decision_ref")} == {
        "ref": offer.ref,
        "status": "OFFERED",
        "version": 1,
        "vacancy": offer.vacancy.ref,
        "entry": offer.entry.ref,
        "hold": offer.hold.ref,
        "decision_ref": offer.decision_ref,
    }
    vacancy = staff_api.get(f"{base}/vacancies/{offer.vacancy.ref}").json()
    assert vacancy["active_offer"] == offer.ref and vacancy["starts_at"] == "2030-12-03T10:00:00+09:00"
    assert vacancy["ends_at"] == "2030-12-03T10:30:00+09:00" and vacancy["status"] == "OPEN"


def test_claim_conflicts_over_http(world, staff_api, base, offer, frozen_clock):
    url = f"{base}/offers/{offer.ref}/claim"
    stale = post(staff_api, url, {"expected_version": 3}, key="v3")
    assert stale.status_code == 409 and stale.json()["code"] == "VERSION_CONFLICT"
    assert post(staff_api, url, {"expected_version": 3}, key="v3").json() == stale.json()  # stored too
    assert post(staff_api, url, {"expected_version": 1}, key="v3").status_code == 422  # key reused
    missing = post(staff_api, url, {})
    assert missing.status_code == 400 and "expected_version" in missing.json()["fields"]
    frozen_clock.move_to(offer.expires_at)
    expired = post(staff_api, url, {"expected_version": 1})
    assert expired.status_code == 409 and expired.json()["code"] == "OFFER_EXPIRED"


def test_claim_double_submit_without_a_key_gets_the_same_body(staff_api, base, offer):
    url = f"{base}/offers/{offer.ref}/claim"
    first = post(staff_api, url, {"expected_version": 1})
    second = post(staff_api, url, {"expected_version": 1})
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert set(first.json()) >= {"status", "hold", "hold_expires_at", "receipt"}


def test_decline_and_withdraw_over_http(world, staff_api, admin_api, base, offer):
    declined = post(admin_api, f"{base}/offers/{offer.ref}/decline", {}, key="d1")
    assert declined.status_code == 200 and declined.json()["status"] == "DECLINED"
    again = post(admin_api, f"{base}/offers/{offer.ref}/withdraw", {"reason": "x"})
    assert again.status_code == 409 and again.json()["code"] == "OFFER_NOT_WITHDRAWABLE"
    assert post(admin_api, f"{base}/offers/{offer.ref}/withdraw", {}).status_code == 400  # reason required


def test_staff_decline_on_the_patients_behalf_is_403_and_changes_nothing(world, staff_api, base, offer):
    response = post(staff_api, f"{base}/offers/{offer.ref}/decline", {"reason": "patient called"}, key="d1")
    assert response.status_code == 403 and response.json()["code"] == "PERMISSION_DENIED"
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED and offer.entry.status == EntryStatus.OFFERED


def test_an_admin_decline_on_the_patients_behalf_is_audited(world, admin_api, base, offer):
    from common.models import AuditEntry

    answer = post(admin_api, f"{base}/offers/{offer.ref}/decline", {"reason": "patient called"}, key="d1")
    assert answer.status_code == 200
    row = AuditEntry.objects.get(action="waitlist.offer_decline")
    assert row.target_ref == offer.ref and row.reason == "patient called"


def test_the_decline_service_refuses_a_staff_actor_whatever_the_front_end(world, offer):
    from common.errors import PermissionDenied
    from waitlist import services

    with pytest.raises(PermissionDenied):
        services.offer_decline(clinic=world.clinic, offer_ref=offer.ref, actor=world.staff, reason="x")


def test_book_needs_an_accepted_hold(world, staff_api, base, offer):
    refused = post(staff_api, f"{base}/holds/{offer.hold.ref}/book", key="b1")
    assert refused.status_code == 409 and refused.json()["code"] == "HOLD_NOT_BOOKABLE"
    assert post(staff_api, f"{base}/holds/hld_nope/book").status_code == 404


def test_admin_withdraw_returns_the_entry_to_waiting(world, admin_api, base, offer):
    response = post(admin_api, f"{base}/offers/{offer.ref}/withdraw", {"reason": "clinic closed"}, key="w1")
    assert response.status_code == 200 and response.json()["status"] == "WITHDRAWN"
    offer.refresh_from_db()
    assert offer.status == OfferStatus.WITHDRAWN and offer.entry.status == EntryStatus.WAITING


def test_staff_withdraw_is_403_and_changes_nothing(world, staff_api, base, offer):
    """Withdraw is ADMIN everywhere (``scoping.COMMAND_ROLES``): the API agrees with the console and the shell."""
    response = post(staff_api, f"{base}/offers/{offer.ref}/withdraw", {"reason": "clinic closed"}, key="w1")
    assert response.status_code == 403 and response.json()["code"] == "PERMISSION_DENIED"
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED


def test_decision_feed(world, base):
    from tests.waitlist.factories import integration_client

    patient = world.patient()
    body = {
        "patient": patient.ref,
        "decision_ref": "rel-1",
        "status": "STALE",
        "expires_at": (NOW + timedelta(hours=1)).isoformat(),
    }
    feed = integration_client(world.clinic)
    response = post(feed, f"{base}/booking-decisions/", body, key="r1")
    assert response.status_code == 201 and response.json()["status"] == "STALE"
    bad = post(feed, f"{base}/booking-decisions/", {**body, "status": "MAYBE"})
    assert bad.status_code == 400


# --- the permission checklist: anonymous, other tenant, unknown ref; nothing changes -----------


def endpoints(base, offer):
    return [
        ("get", f"{base}/offers/{offer.ref}"),
        ("get", f"{base}/vacancies/{offer.vacancy.ref}"),
        ("get", f"{base}/waitlist-entries/{offer.entry.ref}"),
        ("post", f"{base}/offers/{offer.ref}/claim"),
        ("post", f"{base}/offers/{offer.ref}/decline"),
        ("post", f"{base}/offers/{offer.ref}/withdraw"),
        ("post", f"{base}/vacancies/{offer.vacancy.ref}/dispatch"),
        ("post", f"{base}/waitlist-entries/{offer.entry.ref}/withdraw"),
        ("post", f"{base}/holds/{offer.hold.ref}/book"),
        ("post", f"{base}/waitlist-entries/"),
    ]


def test_anonymous_gets_401_and_nothing_changes(base, offer):
    for method, url in endpoints(base, offer):
        response = getattr(token_client(), method)(url, {"expected_version": 1, "reason": "x"}, format="json")
        assert response.status_code == 401, url
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED and offer.version == 1


def test_another_clinics_user_gets_404_for_everything(base, offer):
    outsider = waitlist_world()
    client = token_client(outsider.staff)
    for method, url in endpoints(base, offer):
        response = getattr(client, method)(url, {"expected_version": 1, "reason": "x"}, format="json")
        assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND", url
    # ...and the offer's ref under the outsider's own clinic is a 404 too, exactly like a missing one.
    own = f"/api/v1/clinics/{outsider.clinic.ref}"
    foreign = client.post(f"{own}/offers/{offer.ref}/claim", {"expected_version": 1}, format="json")
    unknown = client.post(f"{own}/offers/off_missing/claim", {"expected_version": 1}, format="json")
    assert foreign.status_code == unknown.status_code == 404 and foreign.json() == unknown.json()
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED and offer.version == 1
