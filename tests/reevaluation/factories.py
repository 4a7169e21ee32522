"""Builders for reevaluation tests: signed events, stub documents and bulk jobs."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta

from django.utils import timezone

from reevaluation.assessment import document_hash
from reevaluation.crm_stub import stub_document
from reevaluation.intake.services import sign
from reevaluation.models import (
    PRIORITY_RANK,
    ClinicReevaluationSettings,
    InboxEvent,
    InboxStatus,
    JobState,
    PriorityClass,
    ReevaluationJob,
)

DEMO_KEY_ID, DEMO_SECRET = "demo", "demo-secret-change-me"


def fingerprint(crm_ref: str) -> str:
    return hashlib.sha256(crm_ref.encode()).hexdigest()


def event_body(
    clinic, fp: str, revision: int, *, assessment_hash: str, assessment_ref: str = "", **overrides
) -> dict:
    body = {
        "eventId": overrides.pop("eventId", f"evt-{uuid.uuid4().hex}"),
        "tenantGroupId": clinic.tenant_group.ref,
        "clinicId": clinic.ref,
        "patientReferenceFingerprint": fp,
        "profileRevision": revision,
        "materialChange": True,
        "assessmentRef": assessment_ref or f"asm-{revision}",
        "assessmentHash": assessment_hash,
        "occurredAt": timezone.now().isoformat(),
    }
    body.update(overrides)
    return body


def encode(body: dict) -> bytes:
    return json.dumps(body).encode()


def headers(raw: bytes, *, key_id: str = DEMO_KEY_ID, secret: str = DEMO_SECRET, **override) -> dict:
    """Headers signed over the key id, issuer and audience as sent (``override`` included)."""
    values = {"X-Key-Id": key_id, "X-Issuer": "demo-crm", "X-Audience": "clinic-waitlist", **override}
    values.setdefault(
        "X-Signature",
        sign(raw, secret, key_id=values["X-Key-Id"], issuer=values["X-Issuer"], audience=values["X-Audience"]),
    )
    return values


def wsgi_headers(h: dict) -> dict:
    return {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in h.items()}


def document(revision: int, constraints: dict | None = None, ref: str = "") -> dict:
    return stub_document(assessment_ref=ref or f"asm-{revision}", revision=revision, constraints=constraints)


def doc_hash(doc: dict) -> str:
    return document_hash(doc)


def enable(clinic, mode: str = "DRY_RUN", drain: str = "ACTIVE") -> ClinicReevaluationSettings:
    row, _ = ClinicReevaluationSettings.objects.update_or_create(
        clinic=clinic,
        defaults={"tenant_group": clinic.tenant_group, "mutation_mode": mode, "drain_state": drain},
    )
    return row


def bulk_jobs(
    clinic,
    n: int,
    *,
    priority_class: str = PriorityClass.PROPOSED_ONLY,
    start_revision: int = 1,
    created_at=None,
) -> list[ReevaluationJob]:
    """``n`` PENDING jobs for one clinic in two statements (bulk_create), for backlog tests."""
    now = created_at or timezone.now()
    fp = fingerprint(f"bulk-{clinic.pk}-{uuid.uuid4().hex}")
    event = InboxEvent.objects.create(
        event_id=f"bulk-{uuid.uuid4().hex}",
        tenant_group=clinic.tenant_group,
        clinic=clinic,
        fingerprint=fp,
        profile_revision=start_revision,
        material_change=True,
        occurred_at=now,
        body_digest="0" * 64,
        key_id="demo",
        status=InboxStatus.ACCEPTED,
    )
    jobs = [
        ReevaluationJob(
            ref=f"rjb_bulk{clinic.pk}x{i}x{uuid.uuid4().hex[:6]}",
            tenant_group_id=clinic.tenant_group_id,
            clinic=clinic,
            fingerprint=fp,
            revision=start_revision + i,
            event=event,
            assessment_ref=f"asm-{i}",
            assessment_hash="0" * 64,
            state=JobState.PENDING,
            priority_class=priority_class,
            priority=PRIORITY_RANK[priority_class],
            due_at=now + timedelta(minutes=30, seconds=i),
            created_at=now,
        )
        for i in range(n)
    ]
    return ReevaluationJob.objects.bulk_create(jobs, batch_size=2000)
