"""Operator controls: the clinic switch, the tenant allowlist and the policy editor (service, API, command)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from common.models import AuditEntry
from scheduling.services.features import feature_enabled
from tests import factories as f
from waitlist import services
from waitlist.models import NonFreshAction, WaitlistPolicy

SWITCH = "/api/v1/clinics/{}/waitlist/switch"
ALLOW = "/api/v1/clinics/{}/waitlist/tenant-allowlist"
POLICY = "/api/v1/clinics/{}/waitlist/policy"


def test_a_new_tenant_starts_with_the_waitlist_off(db):
    assert not feature_enabled("waitlist", f.ClinicFactory())


def test_allowlisting_one_tenant_leaves_other_tenants_off(db, admin, clinic):
    services.waitlist_tenant_allow(clinic=clinic, allowed=True, actor=admin, reason="pilot start")
    assert feature_enabled("waitlist", clinic)
    assert not feature_enabled("waitlist", f.ClinicFactory())


def test_the_clinic_switch_turns_one_clinic_off_and_on(db, admin, clinic):
    sibling = f.ClinicFactory(tenant_group=clinic.tenant_group)
    services.waitlist_tenant_allow(clinic=clinic, allowed=True, actor=admin, reason="pilot start")
    state = services.waitlist_switch_set(clinic=clinic, enabled=False, actor=admin, reason="staff shortage")
    assert not state.effective and state.clinic_switch is False
    assert feature_enabled("waitlist", sibling)
    assert services.waitlist_switch_set(clinic=clinic, enabled=True, actor=admin, reason="back").effective


def test_a_switch_change_needs_a_reason_and_changes_nothing_without_one(db, admin, clinic):
    with pytest.raises(Exception) as exc:
        services.waitlist_tenant_allow(clinic=clinic, allowed=True, actor=admin, reason="  ")
    assert exc.value.code == "VALIDATION_ERROR"
    assert not feature_enabled("waitlist", clinic) and not AuditEntry.objects.exists()


def test_the_api_switch_is_admin_only_and_audited_with_the_key(db, clinic, admin_client, staff_client):
    body = {"enabled": False, "reason": "incident 42"}
    assert staff_client.post(SWITCH.format(clinic.ref), body, format="json").status_code == 403
    response = admin_client.post(SWITCH.format(clinic.ref), body, format="json", HTTP_IDEMPOTENCY_KEY="k-switch-1")
    assert response.status_code == 200
    assert response.json()["switch"]["clinic_switch"] is False
    audit = AuditEntry.objects.get(action="feature.waitlist.set")
    assert audit.reason == "incident 42" and audit.idempotency_key == "k-switch-1"
    assert audit.result["clinic_enabled"] is False


def test_the_api_allowlist_switches_the_tenant_on(db, clinic, admin_client):
    response = admin_client.post(ALLOW.format(clinic.ref), {"allowed": True, "reason": "go live"}, format="json")
    assert response.status_code == 200 and response.json()["switch"]["effective"] is True


def test_the_api_switch_of_another_tenants_clinic_is_404(db, other_tenant_clinic, admin_client):
    response = admin_client.post(SWITCH.format(other_tenant_clinic.ref), {"enabled": True, "reason": "x" * 6},
                                 format="json")
    assert response.status_code == 404
    assert not AuditEntry.objects.exists()


def test_policy_change_publishes_a_new_version_with_digest_and_audit(db, clinic, admin_client):
    before = services.policy_current(clinic=clinic)
    response = admin_client.post(POLICY.format(clinic.ref), {
        "hold_minutes": 12, "stale_action": "NEXT_CANDIDATE", "reason": "shorter holds"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    policy = WaitlistPolicy.objects.get(clinic=clinic, version=before.version + 1)
    assert body["version"] == policy.version and body["digest"] == policy.digest()
    assert body["fields"]["hold_minutes"] == 12 and policy.stale_action == NonFreshAction.NEXT_CANDIDATE
    audit = AuditEntry.objects.get(action="waitlist.policy_publish")
    assert audit.result["previous_digest"] == before.digest() and audit.result["digest"] == policy.digest()
    assert audit.result["changed"]["hold_minutes"] == [before.hold_minutes, 12]


def test_policy_api_read_is_open_to_staff_but_change_is_admin_only(db, clinic, staff_client):
    assert staff_client.get(POLICY.format(clinic.ref)).json()["version"] == 1
    response = staff_client.post(POLICY.format(clinic.ref), {"hold_minutes": 5, "reason": "sneaky"}, format="json")
    assert response.status_code == 403


@pytest.mark.parametrize("body, field", [
    ({"hold_minutes": 0, "reason": "zero"}, "hold_minutes"),
    ({"stale_action": "GUESS", "reason": "bad choice"}, "stale_action"),
    ({"page_size": 5, "reason": "tuning"}, "page_size"),
])
def test_an_invalid_policy_change_is_refused_and_publishes_nothing(db, clinic, admin_client, body, field):
    response = admin_client.post(POLICY.format(clinic.ref), body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_ERROR"
    assert field in response.json()["fields"]
    assert not WaitlistPolicy.objects.filter(clinic=clinic, version__gt=1).exists()


def test_an_unchanged_policy_is_refused_as_policy_unchanged(db, clinic, admin_client):
    current = services.policy_current(clinic=clinic)
    response = admin_client.post(POLICY.format(clinic.ref), {"hold_minutes": current.hold_minutes, "reason": "same"},
                                 format="json")
    assert response.status_code == 400 and response.json()["code"] == "POLICY_UNCHANGED"


def test_a_stale_expected_version_is_a_version_conflict(db, clinic, admin):
    services.policy_change(clinic=clinic, actor=admin, reason="first", changes={"hold_minutes": 9})
    with pytest.raises(Exception) as exc:
        services.policy_change(clinic=clinic, actor=admin, reason="second", changes={"hold_minutes": 8},
                               expected_version=1)
    assert exc.value.code == "VERSION_CONFLICT"
    assert services.policy_current(clinic=clinic).hold_minutes == 9


def test_the_rollout_command_switches_and_audits(db, clinic, admin, capsys):
    call_command("waitlist_rollout", "allowlist", "--clinic", clinic.ref, "--on", "--reason", "pilot",
                 "--actor-username", admin.username)
    assert feature_enabled("waitlist", clinic)
    call_command("waitlist_rollout", "switch", "--clinic", clinic.ref, "--off", "--reason", "incident",
                 "--actor-username", admin.username)
    assert not feature_enabled("waitlist", clinic)
    assert "effective=False" in capsys.readouterr().out
    assert AuditEntry.objects.filter(action="feature.waitlist.set", actor=admin).count() == 2


def test_the_rollout_command_refuses_a_staff_actor(db, clinic, staff):
    with pytest.raises(CommandError):
        call_command("waitlist_rollout", "switch", "--clinic", clinic.ref, "--on", "--reason", "x",
                     "--actor-username", staff.username)
    assert not AuditEntry.objects.exists()


def test_the_policy_command_sets_fields_through_the_model_form(db, clinic, admin, capsys):
    call_command("waitlist_policy", "set", "--clinic", clinic.ref, "--set", "weekly_offer_cap=",
                 "--set", "unavailable_action=NEXT_CANDIDATE", "--reason", "no cap", "--actor-username", admin.username)
    policy = services.policy_current(clinic=clinic)
    assert policy.weekly_offer_cap is None and policy.unavailable_action == NonFreshAction.NEXT_CANDIDATE
    assert f"digest {policy.digest()}" in capsys.readouterr().out


def test_the_policy_command_refuses_an_invalid_value(db, clinic, admin):
    with pytest.raises(CommandError, match="VALIDATION_ERROR"):
        call_command("waitlist_policy", "set", "--clinic", clinic.ref, "--set", "hold_minutes=soon",
                     "--reason", "bad", "--actor-username", admin.username)
    assert services.policy_current(clinic=clinic).version == 1


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_two_admins_publishing_from_the_same_version_make_one_version_and_one_conflict(clinic, admin):
    from tests.conftest import race

    services.policy_current(clinic=clinic)
    results = race(lambda i: services.policy_change(clinic=clinic, actor=admin, reason=f"change {i}",
                                                    changes={"hold_minutes": 30 + i}, expected_version=1), 2)
    published = [r for r in results if isinstance(r, WaitlistPolicy)]
    refused = [r for r in results if not isinstance(r, WaitlistPolicy)]
    assert len(published) == 1 and published[0].version == 2
    assert getattr(refused[0], "code", None) == "VERSION_CONFLICT"
    assert WaitlistPolicy.objects.filter(clinic=clinic).count() == 2
    assert AuditEntry.objects.filter(action="waitlist.policy_publish").count() == 1


def test_a_switch_without_a_reason_is_a_validation_error_and_changes_nothing(db, clinic, admin_client):
    response = admin_client.post(SWITCH.format(clinic.ref), {"enabled": True}, format="json")
    assert response.status_code == 400 and "reason" in response.json()["fields"]
    assert not AuditEntry.objects.exists()
