"""Every outcome named truly and reaching people: needs-staff proposals, the job_completed handler
(staff and patient notices), and the clinic's policy generation that never goes backwards."""

from __future__ import annotations

import pytest
from django.core import mail

from common.models import OutboxMessage, OutboxStatus
from common.outbox import outbox_deliver_due
from reevaluation import selectors
from reevaluation.crm_stub import stub_document
from reevaluation.models import (
    ClinicReevaluationSettings,
    JobState,
    Outcome,
    QuarantineCase,
    ReevaluationJob,
    ReevaluationOutcome,
)
from reevaluation.services import event_intake
from tests.conftest import assert_no_pii
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event, run_round

pytestmark = pytest.mark.django_db


def run_one(world, crm, revision=1, constraints=None, **kwargs) -> ReevaluationJob:
    ref = post_event(world, world.fp, revision, crm, constraints=constraints, **kwargs).job_ref
    run_round()
    return ReevaluationJob.objects.get(ref=ref)


def test_a_proposal_with_no_feasible_replacement_needs_staff(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    proposed = world.book("PROPOSED", 9)
    job = run_one(world, crm, constraints={"requiredPractitioner": "pr_nobody"})
    assert ReevaluationOutcome.objects.get(job=job).outcome == Outcome.PROPOSAL_NEEDS_STAFF
    proposed.refresh_from_db()
    assert proposed.status == "PROPOSED"  # left for staff, not withdrawn
    assert job.state == JobState.COMPLETED and job.needs_staff
    row = {r["job"]: r for r in selectors.action_queue(clinic=world.clinic)}[job.ref]
    assert row["needs_staff"] is True and row["state"] == "COMPLETED"
    assert selectors.snapshot(clinic=world.clinic)["needs_staff_count"] == 1


def test_a_newer_completed_run_of_the_scope_settles_the_request_for_staff(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    world.book("PROPOSED", 9)
    first = run_one(world, crm, constraints={"requiredPractitioner": "pr_nobody"})
    second = run_one(world, crm, revision=2, constraints={})
    first.refresh_from_db()
    assert not first.needs_staff and not second.needs_staff
    assert first.ref not in [r["job"] for r in selectors.action_queue(clinic=world.clinic)]


@pytest.fixture
def changed(world, crm):
    """An applied run: the PROPOSED is superseded and the HELD replaced (Dr B now required)."""
    world.clinic.settings = {"notification": {"provider": "email"}}
    world.clinic.save(update_fields=["settings"])
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    world.proposed = world.book("PROPOSED", 9)
    world.held = world.book("HELD", 11)
    world.job = run_one(world, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    return world


def test_a_job_completed_row_tells_the_patient_what_changed(changed, caplog):
    message = OutboxMessage.objects.get(topic="reevaluation.job_completed", aggregate_ref=changed.job.ref)
    assert message.recipient_ref == changed.patient.ref
    assert outbox_deliver_due(worker="test") == {"SENT": 1}
    message.refresh_from_db()
    assert message.status == OutboxStatus.SENT and message.last_error_code == ""
    [sent] = mail.outbox
    assert sent.to == [changed.patient.email]
    assert "replaced by a new proposal" in sent.body and "held for you" in sent.body
    assert "demo-policy" not in sent.body and "requiredPractitioner" not in sent.body
    assert_no_pii(caplog.text, [changed.patient])


def test_the_what_changed_notice_carries_a_working_opt_out_link(changed):
    import re

    from django.test import Client

    from scheduling.services.consent import consent_current

    outbox_deliver_due(worker="test")
    [sent] = mail.outbox
    link = re.search(r"https?://[^\s]+(/optout/[^/\s]+/)", sent.body)
    assert link, sent.body
    assert Client().post(link.group(1)).status_code == 200
    assert set(consent_current(changed.patient.pk).values()) == {"REVOKED"}


def test_staff_see_what_changed_with_the_notice_state(changed):
    outbox_deliver_due(worker="test")
    rows = selectors.recent_changes(clinic=changed.clinic)
    assert {(r["appointment"], r["outcome"], r["notice"]) for r in rows} == {
        (changed.proposed.ref, "PROPOSAL_SUPERSEDED", "SENT"),
        (changed.held.ref, "HOLD_REPLACED", "SENT"),
    }
    assert all(r["replacement"] for r in rows)


def test_a_dry_run_completion_is_finished_without_a_notice(world, crm):
    rf.enable(world.clinic, "DRY_RUN")
    world.book("PROPOSED", 9)
    job = run_one(world, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    assert outbox_deliver_due(worker="test") == {"SENT": 1}
    message = OutboxMessage.objects.get(aggregate_ref=job.ref)
    assert (message.status, message.last_error_code, message.sent_at) == ("SENT", "NO_PATIENT_CHANGE", None)
    assert mail.outbox == []


def test_no_consent_means_no_notice(changed):
    from scheduling.models import Appointment, ConsentSource, ConsentState, ContactChannel
    from scheduling.services.consent import consent_record

    ref = changed.job.outcomes.first().appointment_ref
    patient = Appointment.objects.get(clinic=changed.job.clinic, ref=ref).patient
    consent_record(patient=patient, channels=list(ContactChannel.values), state=ConsentState.REVOKED,
                   source=ConsentSource.STAFF, actor_label="test")
    outbox_deliver_due(worker="test")
    message = OutboxMessage.objects.get(aggregate_ref=changed.job.ref)
    assert (message.status, message.last_error_code) == ("SENT", "CONSENT_REVOKED")
    assert mail.outbox == []


def test_no_job_completed_row_stays_pending(changed):
    outbox_deliver_due(worker="test")
    assert not OutboxMessage.objects.filter(topic="reevaluation.job_completed", status="PENDING").exists()


# --- policy ref and generation ------------------------------------------------------------------


def policy_event(world, crm, revision: int, *, policy_ref: str = "demo-policy", generation: int):
    doc = stub_document(
        assessment_ref=f"asm-pol-{world.clinic.pk}-{revision}",
        revision=revision,
        policy_ref=policy_ref,
        policy_generation=generation,
    )
    body = rf.event_body(
        world.clinic, world.fp, revision, assessment_hash=crm.register(doc), assessment_ref=doc["assessmentRef"]
    )
    raw = rf.encode(body)
    ref = event_intake(body=raw, headers=rf.headers(raw)).job_ref
    run_round()
    return ReevaluationJob.objects.get(ref=ref)


def current_policy(clinic) -> tuple:
    return ClinicReevaluationSettings.objects.filter(clinic=clinic).values_list(
        "policy_ref", "policy_generation"
    ).get()


def test_the_clinic_policy_advances_with_accepted_assessments(world, crm):
    rf.enable(world.clinic, "DRY_RUN")
    policy_event(world, crm, 1, generation=3)
    assert current_policy(world.clinic) == ("demo-policy", 3)
    job = policy_event(world, crm, 2, policy_ref="policy-v2", generation=4)
    assert job.state == JobState.COMPLETED
    assert current_policy(world.clinic) == ("policy-v2", 4)


@pytest.mark.parametrize(("policy_ref", "generation"), [("demo-policy", 2), ("other-policy", 3)])
def test_an_older_or_conflicting_policy_is_quarantined_and_never_moves_the_clinic_back(
    world, crm, policy_ref, generation
):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    policy_event(world, crm, 1, generation=3)
    world.book("PROPOSED", 9)
    job = policy_event(world, crm, 2, policy_ref=policy_ref, generation=generation)
    assert (job.state, job.last_failure_code) == (JobState.FAILED, "ASSESSMENT_POLICY_STALE")
    assert not job.outcomes.exists()
    case = QuarantineCase.objects.get(job=job)
    assert (case.category, case.source) == ("CONTRACT", "ASSESSMENT")
    assert current_policy(world.clinic) == ("demo-policy", 3)


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_never_move_the_clinic_policy_back(crm):
    from reevaluation.jobs import worker as worker_module
    from reevaluation.services import dispatch_round
    from tests import factories as f
    from tests.conftest import race
    from tests.worlds import ReevaluationWorld

    world = ReevaluationWorld(f.ClinicFactory())
    rf.enable(world.clinic, "DRY_RUN")
    for i, generation in enumerate((5, 4, 5, 4)):
        fp = rf.fingerprint(f"policy-race-{world.clinic.pk}-{i}")
        doc = stub_document(assessment_ref=f"asm-race-{world.clinic.pk}-{i}", revision=1, policy_generation=generation)
        digest = crm.register(doc)
        body = rf.event_body(world.clinic, fp, 1, assessment_hash=digest, assessment_ref=doc["assessmentRef"])
        raw = rf.encode(body)
        event_intake(body=raw, headers=rf.headers(raw))
    claims = dispatch_round(per_clinic_limit=4)
    results = race(
        lambda i: worker_module.job_run(job_id=claims[i].job_id, owner=claims[i].owner, attempt=claims[i].attempt), 4
    )
    assert not [r for r in results if isinstance(r, Exception)]
    assert current_policy(world.clinic) == ("demo-policy", 5)
    for job in ReevaluationJob.objects.filter(clinic=world.clinic):
        assert job.state == JobState.COMPLETED or job.last_failure_code == "ASSESSMENT_POLICY_STALE"
    # Both generation-5 runs complete; a generation-4 run either came first or was refused.
    completed = ReevaluationJob.objects.filter(clinic=world.clinic, state=JobState.COMPLETED)
    assert completed.filter(target_policy_generation=5).count() == 2
