"""One PRIVACY_BOUNDARY case from a trusted, correctly signed source stops that source's consumer at once;
TRUST failures from unknown senders keep the threshold; only an ADMIN resumes (console, API, audit)."""

from __future__ import annotations

import uuid

import pytest

from common.errors import DomainError
from common.models import AuditEntry
from reevaluation.models import ClinicReevaluationSettings, DrainState
from reevaluation.services import dispatch_round, event_intake
from tests import factories as f
from tests.conftest import token_client
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event

pytestmark = pytest.mark.django_db

DRAIN = "/api/v1/ops/profile-reevaluation/drain"


def _row(clinic) -> ClinicReevaluationSettings:
    return ClinicReevaluationSettings.objects.get(clinic=clinic)


def _privacy_event(clinic, **body_overrides) -> None:
    fp = rf.fingerprint(f"p-{uuid.uuid4().hex}")
    with pytest.raises(DomainError) as refused:
        post_event(clinic, fp, 1, patientName="Kim Mina", **body_overrides)
    assert refused.value.code == "PRIVACY_BOUNDARY"


def test_one_signed_privacy_boundary_event_stops_the_clinic_at_once(world):
    rf.enable(world.clinic, "DRY_RUN")
    _privacy_event(world.clinic)
    row = _row(world.clinic)
    assert (row.drain_state, row.drain_cause) == (DrainState.DRAINED, "PRIVACY_BOUNDARY")
    assert row.drain_detail["key_id"] == rf.DEMO_KEY_ID and row.drain_detail["latest_case"].startswith("rqc_")
    audit = AuditEntry.objects.get(action="reevaluation.privacy_stop")
    assert audit.actor_id is None and audit.result["to"] == "DRAINED"
    post_event(world, world.fp, 1)
    assert dispatch_round() == []  # the consumer is stopped


def test_unsigned_junk_naming_the_clinic_never_stops_it(world, settings):
    settings.REEVALUATION_AUTO_DRAIN_QUARANTINE_THRESHOLD = 3
    rf.enable(world.clinic, "DRY_RUN")
    for i in range(10):
        body = rf.event_body(world.clinic, rf.fingerprint(f"j{i}"), 1, assessment_hash="0" * 64, patientName="x")
        raw = rf.encode(body)
        with pytest.raises(DomainError) as refused:
            event_intake(body=raw, headers=rf.headers(raw, secret="wrong-secret"), source_address="203.0.113.9")
        assert refused.value.code == "SIGNATURE_INVALID"
    assert _row(world.clinic).drain_state == DrainState.ACTIVE


def test_a_bound_keys_privacy_event_for_an_unknown_clinic_stops_every_clinic_of_its_tenant_group(world, settings):
    tenant_group = world.clinic.tenant_group
    sibling = f.ClinicFactory(tenant_group=tenant_group)
    elsewhere = f.ClinicFactory()
    settings.REEVALUATION_HMAC_KEYS = [f"bound:bound-secret:{tenant_group.ref}"]
    for clinic in (world.clinic, sibling, elsewhere):
        rf.enable(clinic, "DRY_RUN")
    body = {**rf.event_body(world.clinic, rf.fingerprint("u"), 1, assessment_hash="0" * 64),
            "clinicId": "cl_unknown", "patientName": "Kim Mina"}
    raw = rf.encode(body)
    with pytest.raises(DomainError):
        event_intake(body=raw, headers=rf.headers(raw, key_id="bound", secret="bound-secret"))
    assert _row(world.clinic).drain_cause == "PRIVACY_BOUNDARY"
    assert _row(sibling).drain_cause == "PRIVACY_BOUNDARY"
    assert _row(elsewhere).drain_state == DrainState.ACTIVE


def test_only_an_admin_resumes_through_the_api_and_it_is_audited(world, admin, staff):
    rf.enable(world.clinic, "DRY_RUN")
    _privacy_event(world.clinic)
    body = {"clinic": world.clinic.ref, "state": "ACTIVE", "reason": "CRM fixed its sender"}
    refused = token_client(staff).post(DRAIN, body, format="json", HTTP_IDEMPOTENCY_KEY="r1")
    assert refused.status_code == 403 and refused.json()["code"] == "PERMISSION_DENIED"
    assert _row(world.clinic).drain_state == DrainState.DRAINED
    resumed = token_client(admin).post(DRAIN, body, format="json", HTTP_IDEMPOTENCY_KEY="r2")
    assert resumed.status_code == 200, resumed.content
    assert resumed.json() == {"clinic": world.clinic.ref, "drain_state": "ACTIVE", "drain_cause": None}
    assert AuditEntry.objects.filter(action="reevaluation.drain_set", actor=admin).count() == 1


def test_the_console_says_why_the_clinic_stopped(world, admin):
    from django.test import Client

    rf.enable(world.clinic, "DRY_RUN")
    _privacy_event(world.clinic)
    client = Client()
    client.force_login(admin)
    html = client.get(f"/console/c/{world.clinic.ref}/reevaluation/").content.decode()
    assert 'data-testid="privacy-stop-banner"' in html
    assert "Kim Mina" not in html
