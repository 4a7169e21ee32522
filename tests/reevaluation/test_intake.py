"""Signed event intake: quarantine reasons, inbox dedupe, heads, out-of-order and stale revisions."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from reevaluation.models import (
    InboxEvent,
    InboxStatus,
    JobState,
    PriorityClass,
    QuarantineCase,
    ReevaluationHead,
    ReevaluationJob,
)
from reevaluation.services import due_override_set
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import json_body, post_event

URL = "/api/v1/events/patient-scheduling-assessment-changed"


def send(client, raw: bytes, headers: dict):
    return client.post(URL, data=raw, content_type="application/json", **rf.wsgi_headers(headers))


def valid_body(clinic, revision=1, **overrides) -> dict:
    return rf.event_body(clinic, rf.fingerprint("CRM-1"), revision, assessment_hash="a" * 64, **overrides)


def test_signed_event_is_accepted_with_a_job(anon_client, clinic):
    raw = rf.encode(valid_body(clinic))
    response = send(anon_client, raw, rf.headers(raw))
    assert response.status_code == 202, response.content
    body = json_body(response)
    assert body["status"] == "ACCEPTED" and body["job"].startswith("rjb_")
    job = ReevaluationJob.objects.get(ref=body["job"])
    assert job.state == JobState.PENDING and job.revision == 1
    assert QuarantineCase.objects.count() == 0


def test_duplicate_event_id_is_answered_once(anon_client, clinic):
    raw = rf.encode(valid_body(clinic))
    assert send(anon_client, raw, rf.headers(raw)).status_code == 202
    again = send(anon_client, raw, rf.headers(raw))
    assert again.status_code == 200 and json_body(again) == {"status": "DUPLICATE"}
    assert InboxEvent.objects.count() == 1 and ReevaluationJob.objects.count() == 1


def test_rotation_accepts_old_and_new_keys(anon_client, clinic, settings):
    settings.REEVALUATION_HMAC_KEYS = ["old:old-secret", "new:new-secret"]
    for revision, (key_id, secret) in enumerate([("old", "old-secret"), ("new", "new-secret")], start=1):
        raw = rf.encode(valid_body(clinic, revision))
        assert send(anon_client, raw, rf.headers(raw, key_id=key_id, secret=secret)).status_code == 202


def _tamper(kind: str, clinic, other_tenant_clinic):
    body = valid_body(clinic)
    raw = rf.encode(body)
    h = rf.headers(raw)
    if kind == "KEY_UNKNOWN":
        h = rf.headers(raw, key_id="nope", secret="x")
    elif kind == "SIGNATURE_INVALID":
        h = rf.headers(raw, secret="wrong-secret")
    elif kind == "SIGNATURE_MISSING":
        h.pop("X-Signature")
    elif kind == "ISSUER_INVALID":
        h["X-Issuer"] = "evil-crm"
    elif kind == "AUDIENCE_INVALID":
        h["X-Audience"] = "someone-else"
    elif kind == "SCHEMA_NOT_JSON":
        raw = b"{not json"
        h = rf.headers(raw)
    elif kind == "SCHEMA_MISSING_FIELD":
        body.pop("profileRevision")
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "SCHEMA_BAD_HASH":
        body["assessmentHash"] = "xyz"
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "SCHEMA_TOO_LARGE":
        body["eventId"] = "x" * 20_000
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "SCHEMA_DEEP_NESTING":
        raw = b"[" * 5000 + b"]" * 5000
        h = rf.headers(raw)
    elif kind == "SCHEMA_BAD_DATE":
        body["occurredAt"] = "2030-13-45T10:00:00+09:00"
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "SCHEMA_NAIVE_DATE":
        body["occurredAt"] = "2030-01-01T10:00:00"
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "SCHEMA_BOOL_REVISION":
        body["profileRevision"] = True
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "FINGERPRINT_INVALID":
        body["patientReferenceFingerprint"] = body["patientReferenceFingerprint"].upper()
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "SCOPE_UNKNOWN_CLINIC":
        body["clinicId"] = "cl_doesnotexist"
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "SCOPE_FOREIGN_TENANT":
        body["clinicId"] = other_tenant_clinic.ref
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "PRIVACY_BOUNDARY":
        body["name"] = "Zelda Quixote"
        body["phone"] = "+8210555000"
        raw = rf.encode(body)
        h = rf.headers(raw)
    elif kind == "PRIVACY_SCORE":
        body["score"] = 0.8675309
        raw = rf.encode(body)
        h = rf.headers(raw)
    return raw, h


@pytest.mark.parametrize(
    "kind, status, code, reason",
    [
        ("KEY_UNKNOWN", 401, "SIGNATURE_INVALID", "KEY_UNKNOWN"),
        ("SIGNATURE_INVALID", 401, "SIGNATURE_INVALID", "SIGNATURE_INVALID"),
        ("SIGNATURE_MISSING", 401, "SIGNATURE_INVALID", "SIGNATURE_INVALID"),
        ("ISSUER_INVALID", 401, "SIGNATURE_INVALID", "ISSUER_INVALID"),
        ("AUDIENCE_INVALID", 401, "SIGNATURE_INVALID", "AUDIENCE_INVALID"),
        ("SCHEMA_NOT_JSON", 400, "SCHEMA_INVALID", "SCHEMA_INVALID"),
        ("SCHEMA_MISSING_FIELD", 400, "SCHEMA_INVALID", "SCHEMA_INVALID"),
        ("SCHEMA_BAD_HASH", 400, "SCHEMA_INVALID", "SCHEMA_INVALID"),
        ("SCHEMA_TOO_LARGE", 413, "PAYLOAD_TOO_LARGE", "SCHEMA_INVALID"),
        ("SCHEMA_DEEP_NESTING", 400, "SCHEMA_INVALID", "SCHEMA_INVALID"),
        ("SCHEMA_BAD_DATE", 400, "SCHEMA_INVALID", "SCHEMA_INVALID"),
        ("SCHEMA_NAIVE_DATE", 400, "SCHEMA_INVALID", "SCHEMA_INVALID"),
        ("SCHEMA_BOOL_REVISION", 400, "SCHEMA_INVALID", "SCHEMA_INVALID"),
        ("FINGERPRINT_INVALID", 400, "SCHEMA_INVALID", "FINGERPRINT_INVALID"),
        ("SCOPE_UNKNOWN_CLINIC", 422, "SCOPE_INVALID", "SCOPE_INVALID"),
        ("SCOPE_FOREIGN_TENANT", 422, "SCOPE_INVALID", "SCOPE_INVALID"),
        ("PRIVACY_BOUNDARY", 422, "PRIVACY_BOUNDARY", "PRIVACY_BOUNDARY"),
        ("PRIVACY_SCORE", 422, "PRIVACY_BOUNDARY", "PRIVACY_BOUNDARY"),
    ],
)
def test_each_refusal_is_quarantined_with_a_digest_and_no_job(
    anon_client, clinic, other_tenant_clinic, kind, status, code, reason
):
    raw, h = _tamper(kind, clinic, other_tenant_clinic)
    response = send(anon_client, raw, h)
    assert response.status_code == status, response.content
    assert json_body(response)["code"] == code
    case = QuarantineCase.objects.get()
    assert case.reason_code == reason
    assert case.evidence_digest == hashlib.sha256(raw).hexdigest() and case.evidence_size == len(raw)
    stored = " ".join(str(v) for v in QuarantineCase.objects.values().first().values())
    assert "Zelda" not in stored and "0.8675309" not in stored and raw.decode(errors="ignore") not in stored
    assert ReevaluationJob.objects.count() == 0 and InboxEvent.objects.count() == 0


def test_event_id_reused_with_another_body_is_quarantined(anon_client, clinic):
    first = valid_body(clinic, 1, eventId="evt-same")
    raw = rf.encode(first)
    assert send(anon_client, raw, rf.headers(raw)).status_code == 202
    raw2 = rf.encode({**first, "profileRevision": 2})
    response = send(anon_client, raw2, rf.headers(raw2))
    assert response.status_code == 422 and json_body(response)["code"] == "EVENT_ID_REUSED"
    assert QuarantineCase.objects.get().reason_code == "EVENT_ID_REUSED"
    assert ReevaluationJob.objects.count() == 1


def test_privacy_quarantine_is_attributed_to_a_valid_scope(anon_client, clinic, other_tenant_clinic):
    raw, h = _tamper("PRIVACY_BOUNDARY", clinic, other_tenant_clinic)
    send(anon_client, raw, h)
    assert QuarantineCase.objects.get().clinic_id == clinic.pk


def test_intake_needs_no_user_and_no_csrf(clinic):
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    raw = rf.encode(valid_body(clinic))
    assert send(client, raw, rf.headers(raw)).status_code == 202


def test_newer_revision_stales_pending_and_retry_wait_jobs(world):
    first = post_event(world, world.fp, 1)
    second = post_event(world, world.fp, 2)
    ReevaluationJob.objects.filter(ref=second.job_ref).update(state=JobState.RETRY_WAIT)
    third = post_event(world, world.fp, 3)
    states = dict(ReevaluationJob.objects.values_list("ref", "state"))
    assert states[first.job_ref] == JobState.STALE
    assert states[second.job_ref] == JobState.STALE
    assert states[third.job_ref] == JobState.PENDING
    assert ReevaluationHead.objects.get().revision == 3


def test_out_of_order_revision_is_recorded_and_not_runnable(world):
    post_event(world, world.fp, 5)
    late = post_event(world, world.fp, 3)
    assert late.status == "ACCEPTED" and late.job_state == JobState.STALE
    assert ReevaluationHead.objects.get().revision == 5  # the head never moves backwards
    assert InboxEvent.objects.get(profile_revision=3).status == InboxStatus.LATE
    assert ReevaluationJob.objects.filter(state=JobState.PENDING).count() == 1


def test_same_revision_from_another_event_is_a_duplicate(world):
    post_event(world, world.fp, 4)
    again = post_event(world, world.fp, 4)
    assert again.status == "DUPLICATE"
    assert ReevaluationJob.objects.count() == 1
    assert InboxEvent.objects.filter(status=InboxStatus.DUPLICATE_REVISION).count() == 1


def test_priority_class_and_due_time_follow_the_patients_appointments(world):
    world.book("PROPOSED", 9)
    proposed_only = post_event(world, world.fp, 1)
    job = ReevaluationJob.objects.get(ref=proposed_only.job_ref)
    assert job.priority_class == PriorityClass.PROPOSED_ONLY
    assert timedelta(minutes=29) < job.due_at - job.created_at <= timedelta(minutes=30)
    world.book("HELD", 11)
    held = ReevaluationJob.objects.get(ref=post_event(world, world.fp, 2).job_ref)
    assert held.priority_class == PriorityClass.HELD_PRESENT and held.priority == 0
    assert held.due_at - held.created_at <= timedelta(minutes=5)
    assert len(held.held_targets) == 1 and len(held.proposed_targets) == 1


def test_clinic_override_never_moves_an_existing_due_at_backwards(world, admin):
    with time_machine.travel(timezone.now(), tick=False):
        job = ReevaluationJob.objects.get(ref=post_event(world, world.fp, 1).job_ref)
        original = job.due_at
        due_override_set(
            clinic=world.clinic, held_minutes=2, proposed_minutes=10, actor=admin, reason="faster"
        )
        job.refresh_from_db()
        assert job.due_at == original  # shorter target: the existing job keeps its due time
        due_override_set(
            clinic=world.clinic, held_minutes=2, proposed_minutes=45, actor=admin, reason="slower"
        )
        job.refresh_from_db()
        assert job.due_at == job.created_at + timedelta(minutes=45)
        newer = ReevaluationJob.objects.get(ref=post_event(world, "b" * 64, 1).job_ref)
        assert newer.due_at == newer.created_at + timedelta(minutes=45)


def test_event_id_seen_in_another_clinic_is_a_reuse(anon_client, clinic):
    from tests import factories as f

    elsewhere = f.ClinicFactory()
    raw = rf.encode(valid_body(clinic, 1, eventId="evt-global"))
    assert send(anon_client, raw, rf.headers(raw)).status_code == 202
    raw2 = rf.encode(valid_body(elsewhere, 1, eventId="evt-global"))
    response = send(anon_client, raw2, rf.headers(raw2))
    assert response.status_code == 422 and json_body(response)["code"] == "EVENT_ID_REUSED"
    assert InboxEvent.objects.count() == 1


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_revisions_leave_one_head_and_one_runnable_job():
    from tests import factories as f
    from tests.conftest import race

    clinic = f.ClinicFactory()
    fp = rf.fingerprint("CRM-race")
    bodies = [
        rf.encode(rf.event_body(clinic, fp, revision, assessment_hash="a" * 64)) for revision in (1, 2, 3, 4)
    ]
    duplicate = bodies[3]
    results = race(lambda i: post_raw((bodies + [duplicate, duplicate])[i]), 6)
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert sorted(r.status for r in results) == ["ACCEPTED"] * 4 + ["DUPLICATE"] * 2
    assert ReevaluationHead.objects.get().revision == 4
    assert list(
        ReevaluationJob.objects.filter(state=JobState.PENDING).values_list("revision", flat=True)
    ) == [4]
    assert ReevaluationJob.objects.filter(state=JobState.STALE).count() == 3
    assert InboxEvent.objects.count() == 4


def post_raw(raw: bytes):
    from reevaluation.services import event_intake

    return event_intake(body=raw, headers=rf.headers(raw))
