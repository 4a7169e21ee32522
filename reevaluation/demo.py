"""Demo reevaluation rows for ``manage.py seed_demo``, made through the services only.

Sets the demo clinics' mutation modes with ``mode_set`` (actor None: a system action, audited) and
gives the console's reevaluation page something to show: signed events go through ``event_intake``
(the real signature, privacy and scope checks), jobs are claimed by ``dispatch_round`` and run by
``job_run`` against an in-process stand-in for the CRM that serves the stub's documents or fails
on purpose. Result per demo clinic: COMPLETED, FAILED (timeouts, redrivable), FAILED (hash
mismatch, quarantined), RETRY_WAIT, STALE and PENDING (HELD_PRESENT) jobs, plus one quarantined
event. Idempotent: a clinic that already has demo events is left alone, and a mode is only set on a
clinic without reevaluation settings, so a second run adds nothing.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from django.utils import timezone

from common.errors import DomainError
from reevaluation.assessment import Assessment, AssessmentTransient, canonical, document_hash, parse_document
from reevaluation.crm_stub import stub_document
from reevaluation.models import ClinicReevaluationSettings, DrainState, InboxEvent, MutationMode, ReevaluationJob
from reevaluation.modes.services import rollout_path, settings_for
from reevaluation.services import (
    dispatch_round,
    drain_set,
    event_intake,
    job_run,
    mode_set,
    signed_headers,
    wake_retries,
)
from scheduling.models import Clinic

DEMO_EVENT_PREFIX = "demo-seed-"
DEMO_MODES = {
    "cl_demo_gangnam": MutationMode.APPLY_PROPOSED_AND_HELD,
    "cl_demo_lisbon": MutationMode.DRY_RUN,
}
#: A fixed source time, so a re-sent demo event has the same bytes (a DUPLICATE, not a reuse).
OCCURRED_AT = "2026-01-05T09:00:00+00:00"


class DemoCRM:
    """Serves the CRM stub's default documents in-process; refs in ``down`` time out.

    The documents are exactly what ``/crm-stub/`` serves for an unregistered ref, so a job redriven
    later from the console is fetched over HTTP by the real worker and succeeds.
    """

    def __init__(self, down: set[str] | None = None):
        self.down = down or set()

    def fetch(self, *, assessment_ref: str, revision: int, expected_hash: str) -> Assessment:
        if assessment_ref in self.down:
            raise AssessmentTransient("ASSESSMENT_TIMEOUT")
        raw = canonical(stub_document(assessment_ref=assessment_ref, revision=revision))
        return parse_document(
            raw, expected_hash=expected_hash, expected_revision=revision, assessment_ref=assessment_ref
        )


def _fingerprint(crm_ref: str) -> str:
    return hashlib.sha256(crm_ref.encode()).hexdigest()


def _post(clinic: Clinic, label: str, crm_ref: str, revision: int, *, tamper: bool = False, **extra):
    """Sign and submit one event; ``tamper`` names a hash the CRM's document will not match."""
    ref = f"asm-{clinic.ref}-{label}"
    document = stub_document(assessment_ref=ref, revision=revision, policy_generation=2 if tamper else 1)
    body = json.dumps(
        {
            "eventId": f"{DEMO_EVENT_PREFIX}{clinic.ref}-{label}-r{revision}",
            "tenantGroupId": clinic.tenant_group.ref,
            "clinicId": clinic.ref,
            "patientReferenceFingerprint": _fingerprint(crm_ref),
            "profileRevision": revision,
            "materialChange": True,
            "assessmentRef": ref,
            "assessmentHash": document_hash(document),
            "occurredAt": OCCURRED_AT,
            **extra,
        }
    ).encode()
    try:
        return event_intake(body=body, headers=signed_headers(body, tenant_group_ref=clinic.tenant_group.ref))
    except DomainError:  # refused on purpose (the quarantine example); the case is recorded
        return None


def _run_round(demo_jobs: set[str], crm: DemoCRM) -> None:
    """One dispatch round; demo jobs meet the demo CRM, anything else the configured one."""
    for claim in dispatch_round():
        ref = ReevaluationJob.objects.filter(pk=claim.job_id).values_list("ref", flat=True).first()
        client = crm if ref in demo_jobs else None
        job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt, client=client)


def _crm_ref(clinic: Clinic, i: int) -> str:
    return f"crm-{clinic.ref}-{i}"  # the scheduling demo's CRM patient refs


def _seed_clinics(clinics: list[Clinic]) -> None:
    """In phases across all clinics, because a dispatch round (and a retry wake-up) is global."""
    last = {c.pk: c.patients.exclude(crm_fingerprint="").count() - 1 for c in clinics}
    clinics = [c for c in clinics if last[c.pk] >= 0]
    jobs: set[str] = set()

    # 1. COMPLETED (the last patient's PROPOSED/HELD appointment is kept: no constraints), and two
    #    that fail: one by timeouts (a redrive candidate), one by a hash mismatch (quarantined).
    for clinic in clinics:
        done = _post(clinic, "done", _crm_ref(clinic, last[clinic.pk]), 1)
        flaky = _post(clinic, "outage", _crm_ref(clinic, 0), 1)
        tampered = _post(clinic, "tampered", f"crm-{clinic.ref}-walk-in", 1, tamper=True)
        jobs |= {r.job_ref for r in (done, flaky, tampered) if r and r.job_ref}
    crm = DemoCRM(down={f"asm-{clinic.ref}-outage" for clinic in clinics})
    for _ in range(10):  # attempts are bounded (REEVALUATION_MAX_ATTEMPTS); stop when nothing waits
        _run_round(jobs, crm)
        if not wake_retries(now=timezone.now() + timedelta(days=1)):
            break

    # 2. RETRY_WAIT: one transient failure, then left to cool down.
    for clinic in clinics:
        retry = _post(clinic, "slow", _crm_ref(clinic, min(1, last[clinic.pk])), 1)
        if retry and retry.job_ref:
            jobs.add(retry.job_ref)
    _run_round(jobs, DemoCRM(down={f"asm-{clinic.ref}-slow" for clinic in clinics}))

    for clinic in clinics:
        # 3. STALE and PENDING: two revisions for the HELD patient (revision 3 supersedes 2; 2 and 3
        #    because in a small clinic this patient may be the one whose revision 1 completed).
        held = _crm_ref(clinic, min(2, last[clinic.pk]))
        _post(clinic, "held", held, 2)
        _post(clinic, "held", held, 3)
        # 4. A quarantined event: a field beyond the minimum payload is a privacy-boundary incident, which
        #    stops the clinic's consumer at once (docs/reevaluation.md); the demo's operator has reviewed it
        #    and resumes, so `make demo-event` is worked on (the stop and the resume stay in the audit log).
        _post(clinic, "extra-field", _crm_ref(clinic, 0), 9, score=0.42)
        if settings_for(clinic).drain_state != DrainState.ACTIVE:
            drain_set(clinic=clinic, state=DrainState.ACTIVE, actor=None,
                      reason="demo: the seeded privacy incident reviewed, consumer resumed (seed_demo)")


def seed_demo(world: dict) -> None:
    """Called by ``manage.py seed_demo`` with ``scheduling.demo.seed_scheduling``'s world."""
    unseeded = []
    for clinic in world["clinics"]:
        mode = DEMO_MODES.get(clinic.ref)
        if mode is None:
            continue
        if not ClinicReevaluationSettings.objects.filter(clinic=clinic).exists():
            # The rollout order, one step at a time, as an operator would (each step audited).
            for step in rollout_path(settings_for(clinic).mutation_mode, mode):
                mode_set(clinic=clinic, mode=step, actor=None, reason="demo rollout (seed_demo)")
        if not InboxEvent.objects.filter(clinic=clinic, event_id__startswith=DEMO_EVENT_PREFIX).exists():
            unseeded.append(clinic)
    if unseeded:
        _seed_clinics(unseeded)
