"""The worker: outcomes per mode, CONFIRMED never touched, fenced leases, CRM faults."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from common.models import OutboxMessage
from reevaluation.assessment import AssessmentClient
from reevaluation.jobs import worker as worker_module
from reevaluation.jobs.leases import Fence
from reevaluation.models import (
    ClinicReevaluationSettings,
    JobState,
    Outcome,
    QuarantineCase,
    ReevaluationJob,
    ReevaluationOutcome,
)
from reevaluation.services import (
    dispatch_round,
    event_intake,
    lease_renew,
    rescue_expired_leases,
    wake_retries,
)
from scheduling.models import Appointment, AppointmentStatus, CapacityAllocation
from scheduling.services import appointment_book, appointment_set_status
from tests import factories as f
from tests.conftest import race, seoul
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event, run_round

pytestmark = pytest.mark.django_db


def appointments_state() -> list:
    rows = list(Appointment.objects.order_by("pk").values())
    allocations = list(
        CapacityAllocation.objects.order_by("pk").values("pk", "active", "appointment_id", "period")
    )
    return [rows, allocations]


def outcomes(job_ref: str) -> dict:
    return {
        o.appointment_ref: (o.outcome, o.applied)
        for o in ReevaluationOutcome.objects.filter(job__ref=job_ref)
    }


@pytest.fixture
def scene(world):
    """PROPOSED 09:00 and HELD 11:00 with Dr A, CONFIRMED 14:00; the CRM now requires Dr B."""
    world.proposed = world.book("PROPOSED", 9)
    world.held = world.book("HELD", 11)
    world.confirmed = world.book("CONFIRMED", 14)
    world.constraints = {"requiredPractitioner": world.dr_b.ref}
    return world


def run_one(world, crm, revision=1, **kwargs):
    result = post_event(world, world.fp, revision, crm, constraints=world.constraints, **kwargs)
    states = run_round()
    return result.job_ref, states


def test_dry_run_records_outcomes_and_changes_nothing(scene, crm):
    rf.enable(scene.clinic, "DRY_RUN")
    before = appointments_state()
    job_ref, states = run_one(scene, crm)
    assert states == [JobState.COMPLETED]
    assert appointments_state() == before
    assert outcomes(job_ref) == {
        scene.proposed.ref: (Outcome.PROPOSAL_SUPERSEDED, False),
        scene.held.ref: (Outcome.HOLD_REPLACED, False),
        # The CONFIRMED 14:00 no longer fits either: a proposal would be made (issue 28), nothing is changed.
        scene.confirmed.ref: (Outcome.CONFIRMED_CHANGE_PROPOSED, False),
    }
    job = ReevaluationJob.objects.get(ref=job_ref)
    assert job.outcome_counts == {"CONFIRMED_CHANGE_PROPOSED": 1, "HOLD_REPLACED": 1, "PROPOSAL_SUPERSEDED": 1}
    assert job.target_policy_ref == "demo-policy" and job.target_policy_generation == 1


def test_apply_proposed_changes_only_the_proposal(scene, crm):
    rf.enable(scene.clinic, "APPLY_PROPOSED")
    held_before = Appointment.objects.filter(pk=scene.held.pk).values().get()
    job_ref, _ = run_one(scene, crm)
    scene.proposed.refresh_from_db()
    assert scene.proposed.status == AppointmentStatus.CANCELLED
    replacement = ReevaluationOutcome.objects.get(appointment_ref=scene.proposed.ref).replacement_ref
    new = Appointment.objects.get(ref=replacement)
    assert new.status == AppointmentStatus.PROPOSED and new.practitioner == scene.dr_b
    assert new.starts_at == scene.proposed.starts_at
    assert Appointment.objects.filter(pk=scene.held.pk).values().get() == held_before
    assert outcomes(job_ref)[scene.held.ref] == (Outcome.HOLD_REPLACED, False)


def test_apply_held_replaces_the_hold_atomically(scene, crm):
    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    job_ref, _ = run_one(scene, crm)
    assert outcomes(job_ref)[scene.held.ref] == (Outcome.HOLD_REPLACED, True)
    new = Appointment.objects.get(
        ref=ReevaluationOutcome.objects.get(appointment_ref=scene.held.ref).replacement_ref
    )
    assert new.status == AppointmentStatus.HELD and new.practitioner == scene.dr_b
    assert CapacityAllocation.objects.filter(appointment=new, active=True).count() == 1
    old = Appointment.objects.get(pk=scene.held.pk)
    assert (old.cancel_reason_code, old.cancelled_by) == ("RESCHEDULED", "system:reevaluation")
    assert not CapacityAllocation.objects.filter(appointment=scene.held, active=True).exists()


def test_hold_falls_back_to_proposed_when_no_replacement_is_free(scene, crm):
    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    appointment_book(
        clinic=scene.clinic,
        patient=scene.other_patient,
        practitioner=scene.dr_b,
        treatment=scene.treatment,
        starts_at=seoul(5, 11),
        status="CONFIRMED",
    )
    job_ref, _ = run_one(scene, crm)
    assert outcomes(job_ref)[scene.held.ref] == (Outcome.FALLBACK_TO_PROPOSED, True)
    scene.held.refresh_from_db()
    assert scene.held.status == AppointmentStatus.PROPOSED
    assert not CapacityAllocation.objects.filter(appointment=scene.held, active=True).exists()


def test_fitting_hold_is_kept_and_immaterial_change_is_unchanged(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    held = world.book("HELD", 10, practitioner=world.dr_b)
    world.constraints = {"requiredPractitioner": world.dr_b.ref}
    job_ref, _ = run_one(world, crm)
    assert outcomes(job_ref) == {held.ref: (Outcome.HOLD_KEPT, False)}
    proposed = world.book("PROPOSED", 12)
    job_ref, _ = run_one(world, crm, revision=2, material=False)
    assert outcomes(job_ref) == {
        held.ref: (Outcome.SKIPPED_UNCHANGED, False),
        proposed.ref: (Outcome.SKIPPED_UNCHANGED, False),
    }


def test_target_confirmed_after_intake_is_skipped_ineligible(scene, crm):
    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    result = post_event(scene, scene.fp, 1, crm, constraints=scene.constraints)
    appointment_set_status(clinic=scene.clinic, appointment_ref=scene.held.ref, target="CONFIRMED")
    run_round()
    assert outcomes(result.job_ref)[scene.held.ref] == (Outcome.SKIPPED_INELIGIBLE, False)
    scene.held.refresh_from_db()
    assert scene.held.status == AppointmentStatus.CONFIRMED and scene.held.practitioner == scene.dr_a


def test_constraints_on_resource_and_length(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    held = world.book("HELD", 10, resource=world.room)
    world.constraints = {"resourceNeed": "LASER", "minimumSlotMinutes": 45}
    job_ref, _ = run_one(world, crm)
    assert outcomes(job_ref)[held.ref] == (Outcome.HOLD_REPLACED, True)
    new = Appointment.objects.get(
        ref=ReevaluationOutcome.objects.get(appointment_ref=held.ref).replacement_ref
    )
    assert new.resource == world.laser and new.treatment == world.long_treatment


def test_one_outbox_message_per_completed_job(scene, crm):
    rf.enable(scene.clinic, "DRY_RUN")
    job_ref, _ = run_one(scene, crm)
    message = OutboxMessage.objects.get(topic="reevaluation.job_completed")
    assert message.aggregate_ref == job_ref and message.clinic_ref == scene.clinic.ref
    assert message.payload["outcome_counts"] == {
        "CONFIRMED_CHANGE_PROPOSED": 1, "HOLD_REPLACED": 1, "PROPOSAL_SUPERSEDED": 1}


def test_running_job_overtaken_by_a_newer_revision_finishes_stale(scene, crm):
    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    post_event(scene, scene.fp, 1, crm, constraints=scene.constraints)
    [claim] = dispatch_round()
    post_event(scene, scene.fp, 2, crm, constraints=scene.constraints)
    state = worker_module.job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt)
    assert state == JobState.STALE
    assert not ReevaluationOutcome.objects.filter(job_id=claim.job_id).exists()


def test_redelivered_message_is_a_no_op(scene, crm):
    rf.enable(scene.clinic, "DRY_RUN")
    post_event(scene, scene.fp, 1, crm, constraints=scene.constraints)
    [claim] = dispatch_round()
    args = {"job_id": claim.job_id, "owner": claim.owner, "attempt": claim.attempt}
    assert worker_module.job_run(**args) == JobState.COMPLETED
    assert worker_module.job_run(**args) == "NOOP"
    assert OutboxMessage.objects.filter(topic="reevaluation.job_completed").count() == 1


def test_worker_that_lost_its_lease_changes_nothing_and_the_job_completes_once(scene, crm):
    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    post_event(scene, scene.fp, 1, crm, constraints=scene.constraints)
    [claim] = dispatch_round()
    dead = worker_module.lease_start(claim.fence)  # worker A starts, then dies mid-lease
    assessment = AssessmentClient().fetch(
        assessment_ref=ReevaluationJob.objects.get(pk=claim.job_id).assessment_ref,
        revision=1,
        expected_hash=ReevaluationJob.objects.get(pk=claim.job_id).assessment_hash,
    )
    later = timezone.now() + timedelta(seconds=120)
    with time_machine.travel(later, tick=False):
        assert lease_renew(dead) is False  # too late: the lease expired
        assert rescue_expired_leases() == 1
        job = ReevaluationJob.objects.get(pk=claim.job_id)
        assert job.state == JobState.PENDING and job.last_failure_code == "LEASE_EXPIRED"
        assert run_round() == [JobState.COMPLETED]  # worker B: attempt 2
    # Worker A wakes up and tries to write back with its old fence: nothing happens.
    assert worker_module.job_complete(dead, assessment=assessment) == "LEASE_LOST"
    assert worker_module.job_fail_transient(dead, code="ASSESSMENT_TIMEOUT") == "LEASE_LOST"
    job = ReevaluationJob.objects.get(pk=claim.job_id)
    assert job.state == JobState.COMPLETED and job.attempts == 2
    assert ReevaluationOutcome.objects.filter(job=job).count() == 3  # with the CONFIRMED one's proposal
    assert OutboxMessage.objects.filter(topic="reevaluation.job_completed").count() == 1
    assert Appointment.objects.filter(status=AppointmentStatus.HELD, practitioner=scene.dr_b).count() == 1
    assert ClinicReevaluationSettings.objects.get(clinic=scene.clinic).lease_renewal_failures == 1


def test_lease_renewal_extends_a_live_lease(scene, crm):
    rf.enable(scene.clinic, "DRY_RUN")
    post_event(scene, scene.fp, 1, crm)
    [claim] = dispatch_round()
    fence = worker_module.lease_start(claim.fence)
    before = ReevaluationJob.objects.get(pk=claim.job_id).lease_expires_at
    with time_machine.travel(timezone.now() + timedelta(seconds=30), tick=False):
        assert lease_renew(fence) is True
    assert ReevaluationJob.objects.get(pk=claim.job_id).lease_expires_at > before
    assert lease_renew(Fence(claim.job_id, "someone-else", claim.attempt)) is False


@pytest.mark.parametrize("mode, code", [("slow", "ASSESSMENT_TIMEOUT"), ("error", "ASSESSMENT_UNAVAILABLE")])
def test_transient_crm_failures_wait_then_fail_after_max_attempts(scene, crm, mode, code):
    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    crm.mode = mode
    job_ref = post_event(scene, scene.fp, 1, crm, constraints=scene.constraints).job_ref
    ReevaluationJob.objects.filter(ref=job_ref).update(max_attempts=3)
    now = timezone.now()
    for attempt in (1, 2, 3):
        with time_machine.travel(now, tick=False):
            wake_retries()
            states = run_round()
        job = ReevaluationJob.objects.get(ref=job_ref)
        assert job.last_failure_code == code and job.attempts == attempt
        if attempt < 3:
            assert states == [JobState.RETRY_WAIT] and job.state == JobState.RETRY_WAIT
            assert job.next_attempt_at == now + timedelta(seconds=30 * 2 ** (attempt - 1))
            with time_machine.travel(now, tick=False):
                assert wake_retries() == 0  # cooldown not over
            now = job.next_attempt_at
        else:
            assert states == [JobState.FAILED] and job.state == JobState.FAILED
    assert ClinicReevaluationSettings.objects.get(clinic=scene.clinic).consecutive_assessment_failures == 3
    assert not QuarantineCase.objects.exists()
    assert Appointment.objects.filter(practitioner=scene.dr_b).count() == 0


def test_crm_recovering_resets_the_failure_streak(scene, crm):
    rf.enable(scene.clinic, "DRY_RUN")
    crm.mode = "error"
    job_ref = post_event(scene, scene.fp, 1, crm, constraints=scene.constraints).job_ref
    run_round()
    crm.mode = "ok"
    with time_machine.travel(timezone.now() + timedelta(minutes=5), tick=False):
        wake_retries()
        assert run_round() == [JobState.COMPLETED]
    assert ReevaluationJob.objects.get(ref=job_ref).attempts == 2
    assert ClinicReevaluationSettings.objects.get(clinic=scene.clinic).consecutive_assessment_failures == 0


@pytest.mark.parametrize(
    "mode, code",
    [
        ("tamper", "ASSESSMENT_HASH_MISMATCH"),
        ("privacy", "PRIVACY_BOUNDARY"),
        ("revision", "ASSESSMENT_REVISION_MISMATCH"),
        ("garbage", "ASSESSMENT_CONTRACT_INVALID"),
    ],
)
def test_untrustworthy_assessment_is_quarantined_not_retried(scene, crm, mode, code):
    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    before = appointments_state()
    if mode == "revision":
        # A consistent document (its hash matches the event) that names another revision.
        doc = {**rf.document(7, scene.constraints, ref="asm-rev"), "profileRevision": 8}
        raw = rf.encode(
            rf.event_body(
                scene.clinic, scene.fp, 7, assessment_hash=crm.register(doc), assessment_ref="asm-rev"
            )
        )
        job_ref = event_intake(body=raw, headers=rf.headers(raw)).job_ref
    else:
        crm.mode = mode
        job_ref = post_event(scene, scene.fp, 1, crm, constraints=scene.constraints).job_ref
    assert run_round() == [JobState.FAILED]
    job = ReevaluationJob.objects.get(ref=job_ref)
    assert job.last_failure_code == code and job.attempts == 1
    case = QuarantineCase.objects.get()
    assert case.reason_code == code and case.source == "ASSESSMENT" and case.job == job
    assert "Zelda" not in str(QuarantineCase.objects.values().get())
    assert appointments_state() == before


def test_unreachable_crm_is_unavailable(scene, settings):
    settings.CRM_BASE_URL = "http://127.0.0.1:9"  # nothing listens on discard
    rf.enable(scene.clinic, "DRY_RUN")
    post_event(scene, scene.fp, 1)
    assert run_round() == [JobState.RETRY_WAIT]
    assert ReevaluationJob.objects.get().last_failure_code == "ASSESSMENT_UNAVAILABLE"


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_for_one_claim_never_both_own_it(crm):
    clinic = f.ClinicFactory()
    from tests.worlds import ReevaluationWorld

    world = ReevaluationWorld(clinic)
    world.book("PROPOSED", 9)
    world.constraints = {"requiredPractitioner": world.dr_b.ref}
    rf.enable(clinic, "APPLY_PROPOSED")
    post_event(world, world.fp, 1, crm, constraints=world.constraints)
    [claim] = dispatch_round()
    results = race(
        lambda i: worker_module.job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt), 4
    )
    assert sorted(map(str, results)) == ["COMPLETED", "NOOP", "NOOP", "NOOP"]
    assert ReevaluationOutcome.objects.count() == 1
    assert Appointment.objects.filter(status=AppointmentStatus.PROPOSED, practitioner=world.dr_b).count() == 1
    assert OutboxMessage.objects.filter(topic="reevaluation.job_completed").count() == 1


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_heartbeat_renews_while_the_crm_is_slow(crm, settings):
    settings.REEVALUATION_LEASE_SECONDS = 3  # renewed every second
    settings.CRM_READ_TIMEOUT_SECONDS = 5.0
    crm.mode, crm.delay = "slow", 1.6  # injected latency longer than the renewal interval
    clinic = f.ClinicFactory()
    from tests.worlds import ReevaluationWorld

    world = ReevaluationWorld(clinic)
    rf.enable(clinic, "DRY_RUN")
    post_event(world, world.fp, 1, crm)
    [claim] = dispatch_round()
    state = worker_module.job_run(
        job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt, heartbeat=True
    )
    assert state == JobState.COMPLETED
    job = ReevaluationJob.objects.get(pk=claim.job_id)
    assert job.lease_renewed_at - job.first_claimed_at >= timedelta(seconds=0.9)
    assert job.renewal_failures == 0


def test_lost_message_is_rescued_and_completed_once(scene, crm):
    rf.enable(scene.clinic, "DRY_RUN")
    post_event(scene, scene.fp, 1, crm, constraints=scene.constraints)
    [lost] = dispatch_round()  # the task message for this claim never arrives
    with time_machine.travel(timezone.now() + timedelta(seconds=61), tick=False):
        assert rescue_expired_leases() == 1
        assert run_round() == [JobState.COMPLETED]
    # The message turns up late after all: its claim is stale and it does nothing.
    assert worker_module.job_run(job_id=lost.job_id, owner=lost.owner, attempt=lost.attempt) == "NOOP"
    assert OutboxMessage.objects.filter(topic="reevaluation.job_completed").count() == 1


def test_write_back_that_would_touch_a_confirmed_row_is_rolled_back(scene, crm, monkeypatch):
    """The production safety net: a CONFIRMED digest mismatch aborts the whole write-back."""
    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    real = worker_module._decide_all

    def buggy(job, assessment, mode, *rest):  # a hypothetical bug that edits a CONFIRMED appointment
        decisions = real(job, assessment, mode, *rest)
        Appointment.objects.filter(pk=scene.confirmed.pk).update(cancel_reason="oops")
        return decisions

    monkeypatch.setattr(worker_module, "_decide_all", buggy)
    before = appointments_state()
    job_ref, states = run_one(scene, crm)
    assert states == [JobState.RETRY_WAIT]
    job = ReevaluationJob.objects.get(ref=job_ref)
    assert job.last_failure_code == "CONFIRMED_PROTECTED"
    assert appointments_state() == before and not ReevaluationOutcome.objects.exists()


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_hold_replacement_racing_a_booking_for_the_same_slot(crm):
    """The exclusion constraint judges: either the hold moves or the booking wins, never both."""
    clinic = f.ClinicFactory()
    from tests.worlds import ReevaluationWorld

    world = ReevaluationWorld(clinic)
    held = world.book("HELD", 11)
    rf.enable(clinic, "APPLY_PROPOSED_AND_HELD")
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    [claim] = dispatch_round()

    def work(i):
        if i == 0:
            return worker_module.job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt)
        return appointment_book(
            clinic=clinic,
            patient=world.other_patient,
            practitioner=world.dr_b,
            treatment=world.treatment,
            starts_at=seoul(5, 11),
            status="CONFIRMED",
        )

    job_state, booking = race(work, 2)
    assert job_state == JobState.COMPLETED
    outcome = ReevaluationOutcome.objects.get(appointment_ref=held.ref).outcome
    # Appointments only: a HELD that fell back gets a proposal whose holds take Dr B's other times (issue 28).
    dr_b_active = CapacityAllocation.objects.filter(practitioner=world.dr_b, active=True, kind="APPOINTMENT").count()
    assert dr_b_active == 1
    if isinstance(booking, Exception):
        assert outcome == Outcome.HOLD_REPLACED
    else:
        assert outcome == Outcome.FALLBACK_TO_PROPOSED
        held.refresh_from_db()
        assert held.status == AppointmentStatus.PROPOSED


def test_stale_settings_copy_is_a_version_conflict(world, admin):
    from common.cas import cas_update
    from common.errors import VersionConflict
    from reevaluation.modes.services import settings_for

    stale = settings_for(world.clinic)
    from reevaluation.services import mode_set

    mode_set(clinic=world.clinic, mode="DRY_RUN", actor=admin, reason="rollout")
    with pytest.raises(VersionConflict):
        cas_update(stale, mutation_mode="APPLY_PROPOSED")
    assert ClinicReevaluationSettings.objects.get(clinic=world.clinic).mutation_mode == "DRY_RUN"


def test_an_assessment_with_raw_profile_data_stops_the_clinic_at_once(scene, crm):
    """The CRM's authenticated assessment API is a trusted source: one PRIVACY_BOUNDARY case drains the clinic."""
    from reevaluation.models import DrainState

    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    crm.mode = "privacy"
    post_event(scene, scene.fp, 1, crm, constraints=scene.constraints)
    assert run_round() == [JobState.FAILED]
    row = ClinicReevaluationSettings.objects.get(clinic=scene.clinic)
    assert (row.drain_state, row.drain_cause) == (DrainState.DRAINED, "PRIVACY_BOUNDARY")
    assert row.drain_detail["source"] == "ASSESSMENT"


def test_an_untrustworthy_hash_keeps_the_clinic_running(scene, crm):
    from reevaluation.models import DrainState

    rf.enable(scene.clinic, "APPLY_PROPOSED_AND_HELD")
    crm.mode = "tamper"
    post_event(scene, scene.fp, 1, crm, constraints=scene.constraints)
    assert run_round() == [JobState.FAILED]
    assert ClinicReevaluationSettings.objects.get(clinic=scene.clinic).drain_state == DrainState.ACTIVE
