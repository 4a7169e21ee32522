"""Shadow policy: observed on every dispatch (same transaction, no notice, no hold), promoted or discarded."""

from __future__ import annotations

from datetime import timedelta

import pytest

from common.models import AuditEntry, OutboxMessage
from scheduling.models import CapacityHold, Role
from tests import factories as f
from tests.conftest import seoul, token_client
from tests.waitlist.loop_helpers import open_vacancy
from waitlist import services
from waitlist.models import ShadowObservation, ShadowStatus, WaitlistPolicy

BASE = "/api/v1/clinics/{}/shadow-policy"


@pytest.fixture
def admin(world):
    return f.user_with_role(world.clinic, Role.ADMIN, username="shadow-admin")


def publish(world, admin, **changes):
    return services.shadow_publish(clinic=world.clinic, actor=admin, reason="try a tighter cap", changes=changes)


def dispatch(world, vacancy):
    return services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)


def test_dispatch_records_whom_the_shadow_would_offer_without_notice_or_hold(world, admin):
    publish(world, admin, hold_minutes=5)
    entry = world.waiting()
    result = dispatch(world, open_vacancy(world))
    observation = ShadowObservation.objects.get()
    assert observation.agreed and observation.enforced_entry_id == entry.pk == observation.shadow_entry_id
    assert observation.correlation_id == result.offer.correlation_id
    assert CapacityHold.objects.count() == 1 and OutboxMessage.objects.count() == 1  # the enforced offer's only


def test_a_tighter_weekly_cap_in_shadow_records_the_difference_and_its_reason(world, admin):
    first = world.waiting(waiting_since=seoul(1, 9) - timedelta(days=10))
    earlier = dispatch(world, open_vacancy(world, seoul(2, 10))).offer
    assert earlier.entry_id == first.pk
    services.offer_withdraw(clinic=world.clinic, offer_ref=earlier.ref, actor=admin, reason="rebook")
    second = world.waiting()
    publish(world, admin, weekly_offer_cap=1)
    result = dispatch(world, open_vacancy(world, seoul(3, 11)))
    assert result.offer.entry_id == first.pk  # the enforced cap (3) lets the first in line through
    observation = ShadowObservation.objects.get()
    assert not observation.agreed and observation.shadow_entry_id == second.pk
    assert observation.reason_code == "ENFORCED_ENTRY_WEEKLY_CAP"


def test_the_observation_rolls_back_with_the_promotion(world, admin, monkeypatch):
    from waitlist.dispatch import offer_write

    publish(world, admin, hold_minutes=5)
    world.waiting()
    vacancy = open_vacancy(world)

    def boom(*args, **kwargs):
        raise RuntimeError("after the hook")

    monkeypatch.setattr(offer_write, "_offer_write", boom)  # the offer's own writes, after the observation
    with pytest.raises(RuntimeError):
        dispatch(world, vacancy)
    assert not ShadowObservation.objects.exists()


def test_without_a_shadow_nothing_is_observed(world):
    world.waiting()
    assert dispatch(world, open_vacancy(world)).outcome == "OFFERED"
    assert not ShadowObservation.objects.exists()


def test_promote_enforces_the_shadow_as_a_new_audited_version(world, admin):
    shadow = publish(world, admin, weekly_offer_cap=1)
    before = services.policy_current(clinic=world.clinic).version
    shadow, policy = services.shadow_promote(clinic=world.clinic, shadow_ref=shadow.ref, actor=admin, reason="ok")
    assert policy.version == before + 1 and policy.weekly_offer_cap == 1
    assert shadow.status == ShadowStatus.PROMOTED and shadow.promoted_version == policy.version
    assert AuditEntry.objects.filter(action="waitlist.shadow_policy_promote", target_ref=shadow.ref).exists()


def test_discard_keeps_the_enforced_policy(world, admin):
    shadow = publish(world, admin, weekly_offer_cap=1)
    versions = WaitlistPolicy.objects.filter(clinic=world.clinic).count()
    services.shadow_discard(clinic=world.clinic, shadow_ref=shadow.ref, actor=admin, reason="no")
    assert WaitlistPolicy.objects.filter(clinic=world.clinic).count() == versions
    shadow.refresh_from_db()
    assert shadow.status == ShadowStatus.DISCARDED


def test_api_publish_is_admin_only_and_one_shadow_at_a_time(world, admin, staff_api):
    url = BASE.format(world.clinic.ref)
    body = {"reason": "observe", "changes": {"weekly_offer_cap": 1}}
    assert staff_api.post(url, body, format="json").status_code == 403
    api = token_client(admin)
    created = api.post(url, body, format="json")
    assert created.status_code == 201, created.content
    again = api.post(url, body, format="json")
    assert again.status_code == 409 and again.json()["code"] == "SHADOW_EXISTS"
    assert api.post(url, {"reason": "x", "changes": {"nope": 1}}, format="json").status_code == 400


def test_api_summary_shows_agreement_and_promote_then_refuses_a_second_decision(world, admin, staff_api):
    api = token_client(admin)
    ref = api.post(BASE.format(world.clinic.ref), {"reason": "observe", "changes": {"hold_minutes": 5}},
                   format="json").json()["ref"]
    world.waiting()
    dispatch(world, open_vacancy(world))
    summary = staff_api.get(BASE.format(world.clinic.ref)).json()["shadow"]
    assert summary["observations"] == 1 and summary["agreement_rate"] == 1.0 and summary["changes"] == {
        "hold_minutes": 5}
    promoted = api.post(f"{BASE.format(world.clinic.ref)}/{ref}/promote", {"reason": "agrees"}, format="json")
    assert promoted.status_code == 200 and promoted.json()["status"] == "PROMOTED"
    second = api.post(f"{BASE.format(world.clinic.ref)}/{ref}/discard", {"reason": "late"}, format="json")
    assert second.status_code == 409 and second.json()["code"] == "SHADOW_NOT_ACTIVE"
