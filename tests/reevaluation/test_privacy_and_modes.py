"""Privacy scan of every reevaluation output; mutation mode and drain commands; the CRM stub."""

from __future__ import annotations

import json
import logging

import pytest

from common.errors import Conflict
from common.models import AuditEntry, OutboxMessage
from reevaluation.assessment import document_hash
from reevaluation.crm_stub import stub_document, stub_register
from reevaluation.jobs import worker as worker_module
from reevaluation.models import (
    ClinicReevaluationSettings,
    InboxEvent,
    JobState,
    QuarantineCase,
    ReevaluationJob,
    ReevaluationOutcome,
)
from reevaluation.services import dispatch_round, drain_refresh, drain_set, event_intake, mode_set
from tests.conftest import assert_no_pii
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event, run_round

pytestmark = pytest.mark.django_db

SECRET_CONTENT = "SECRET-KIND-XYZ"


def test_no_patient_data_or_assessment_content_leaves_the_boundary(
    world, crm, admin, admin_client, staff_client, anon_client, caplog
):
    caplog.set_level(logging.DEBUG)
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    world.book("PROPOSED", 9)
    world.book("HELD", 11)
    world.book("CONFIRMED", 14)
    constraints = {"requiredPractitioner": world.dr_b.ref, "resourceNeed": SECRET_CONTENT}
    post_event(world, world.fp, 1, crm, constraints=constraints)
    run_round()
    # a CRM that leaks raw profile data in the assessment, and an event that carries a name
    crm.mode = "privacy"
    post_event(world, world.fp, 2, crm, constraints=constraints)
    run_round()
    body = rf.event_body(world.clinic, world.fp, 3, assessment_hash="a" * 64)
    body["name"] = world.patient.display_name
    body["phone"] = world.patient.phone
    raw = rf.encode(body)
    anon_client.post(
        "/api/v1/events/patient-scheduling-assessment-changed",
        data=raw,
        content_type="application/json",
        **rf.wsgi_headers(rf.headers(raw)),
    )
    ReevaluationJob.objects.filter(state=JobState.COMPLETED).update(state=JobState.FAILED)
    preview = admin_client.post(
        "/api/v1/ops/profile-reevaluation",
        {"action": "PREVIEW", "clinic": world.clinic.ref, "reason": "r", "limit": 5},
        format="json",
    )
    snapshot = staff_client.get("/api/v1/ops/profile-reevaluation", {"clinic": world.clinic.ref})
    assert QuarantineCase.objects.filter(reason_code="PRIVACY_BOUNDARY").count() == 2

    dumps = [
        caplog.text,
        preview.content.decode(),
        snapshot.content.decode(),
        *(
            json.dumps(list(m.objects.values()), default=str)
            for m in (
                QuarantineCase,
                OutboxMessage,
                AuditEntry,
                ReevaluationJob,
                ReevaluationOutcome,
                InboxEvent,
            )
        ),
    ]
    patients = [world.patient, world.other_patient]
    for text in dumps:
        assert_no_pii(text, patients)
        assert SECRET_CONTENT not in text and "0.8675309" not in text
        assert world.crm_ref not in text


def test_mode_and_drain_commands_write_audit_rows(world, admin):
    mode_set(clinic=world.clinic, mode="DRY_RUN", actor=admin, reason="start rollout", idempotency_key="m1")
    row = ClinicReevaluationSettings.objects.get(clinic=world.clinic)
    assert row.mutation_mode == "DRY_RUN"
    drain_set(clinic=world.clinic, state="DRAINING", actor=admin, reason="maintenance")
    row.refresh_from_db()
    assert row.drain_state == "DRAINED"  # nothing was running
    drain_set(clinic=world.clinic, state="ACTIVE", actor=admin, reason="back")
    actions = list(AuditEntry.objects.order_by("pk").values_list("action", "actor_id"))
    assert actions == [
        ("reevaluation.mode_set", admin.pk),
        ("reevaluation.drain_set", admin.pk),
        ("reevaluation.drain_set", admin.pk),
    ]
    with pytest.raises(Exception) as err:
        mode_set(clinic=world.clinic, mode="YOLO", actor=admin, reason="x")
    assert getattr(err.value, "code", "") == "VALIDATION_ERROR"


def test_draining_stops_claims_and_becomes_drained_without_leases(world, crm, admin):
    rf.enable(world.clinic, "DRY_RUN")
    post_event(world, world.fp, 1, crm)
    post_event(world, rf.fingerprint("another"), 1, crm)
    [claim, _] = dispatch_round(per_clinic_limit=2)
    drain_set(clinic=world.clinic, state="DRAINING", actor=admin, reason="deploy")
    with pytest.raises(Conflict) as err:
        drain_set(clinic=world.clinic, state="DRAINED", actor=admin, reason="deploy")
    assert err.value.code == "DRAIN_LEASES_ACTIVE"
    post_event(world, rf.fingerprint("third"), 1, crm)
    assert dispatch_round() == []  # DRAINING: no new claims
    assert drain_refresh() == 0
    ReevaluationJob.objects.filter(pk=_.job_id).update(state=JobState.PENDING, lease_owner="")
    worker_module.job_run(
        job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt
    )  # in-flight work ends
    assert drain_refresh() == 1
    assert ClinicReevaluationSettings.objects.get(clinic=world.clinic).drain_state == "DRAINED"
    assert ReevaluationJob.objects.filter(state=JobState.RUNNING).count() == 0


def test_disabled_clinic_records_jobs_but_runs_none(world, crm):
    rf.enable(world.clinic, "DISABLED")
    world.book("PROPOSED", 9)
    post_event(world, world.fp, 1, crm)
    assert run_round() == []
    assert ReevaluationJob.objects.get().state == JobState.PENDING


def test_crm_stub_serves_the_registered_document(client, settings):
    doc = stub_document(assessment_ref="asm-stub-1", revision=3, constraints={"minimumSlotMinutes": 45})
    digest = stub_register(doc)
    response = client.get(
        "/crm-stub/assessments/asm-stub-1",
        {"revision": 3},
        HTTP_AUTHORIZATION=f"Bearer {settings.CRM_API_TOKEN}",
    )
    assert response.status_code == 200
    assert document_hash(json.loads(response.content)) == digest
    assert client.get("/crm-stub/assessments/asm-stub-1", {"revision": 3}).status_code == 401
    settings.CRM_STUB_ENABLED = False
    assert client.get("/crm-stub/assessments/asm-stub-1", {"revision": 3}).status_code == 404


def test_full_loop_through_the_stub_over_http(world, live_server, settings):
    """Event → job → dispatch → the app's own CRM stub over real HTTP → outcomes (the demo loop)."""
    settings.CRM_BASE_URL = f"{live_server.url}/crm-stub"
    rf.enable(world.clinic, "APPLY_PROPOSED")
    proposed = world.book("PROPOSED", 9)
    doc = stub_document(
        assessment_ref="asm-loop", revision=1, constraints={"requiredPractitioner": world.dr_b.ref}
    )
    raw = rf.encode(
        rf.event_body(
            world.clinic, world.fp, 1, assessment_hash=stub_register(doc), assessment_ref="asm-loop"
        )
    )
    assert event_intake(body=raw, headers=rf.headers(raw)).status == "ACCEPTED"
    assert run_round() == [JobState.COMPLETED]
    assert ReevaluationOutcome.objects.get(appointment_ref=proposed.ref).outcome == "PROPOSAL_SUPERSEDED"
