"""A worker's round writes back its HELD replacements together (``rounds._complete_held_batch``, issue 27
part 3): the same outcomes, rows and notices as one job at a time, a constant number of statements for the
round, and any refusal (a slot taken, a row changed) leaving every job to the one-by-one path."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.models import OutboxMessage
from reevaluation.assessment import AssessmentClient
from reevaluation.models import JobState, Outcome, ReevaluationJob, ReevaluationOutcome
from reevaluation.rounds import services as rounds
from scheduling.models import Appointment, AppointmentStatus, CapacityAllocation
from scheduling.services import appointment_book, appointment_set_status
from tests import factories as f
from tests.conftest import race
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event
from tests.worlds import ReevaluationWorld

pytestmark = pytest.mark.django_db


def _held_scopes(world, crm, n: int, *, first_hour: int = 8) -> list[tuple[str, Appointment]]:
    """``n`` patients, each with one HELD appointment with dr_a and a job whose assessment requires dr_b."""
    scopes = []
    for i in range(n):
        fp = rf.fingerprint(f"batch-{world.clinic.pk}-{first_hour}-{i}")
        patient = f.PatientFactory(clinic=world.clinic, crm_fingerprint=fp)
        held = world.book("HELD", first_hour + i, patient=patient)
        ref = post_event(world, fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref}).job_ref
        scopes.append((ref, held))
    return scopes


def _confirmed() -> dict:
    return {row["id"]: row for row in Appointment.objects.filter(status=AppointmentStatus.CONFIRMED).values()}


def test_a_rounds_held_replacements_are_written_back_together(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    scopes = _held_scopes(world, crm, 4)
    world.book("CONFIRMED", 7, patient=scopes[0][1].patient, practitioner=world.dr_b)  # fits: left alone
    confirmed = _confirmed()
    with CaptureQueriesContext(connection) as queries:
        assert rounds.work_round(client=AssessmentClient()) == {JobState.COMPLETED: 4}
    for job_ref, held in scopes:
        job = ReevaluationJob.objects.get(ref=job_ref)
        assert (job.state, job.outcome_counts, job.needs_staff) == (JobState.COMPLETED, {"HOLD_REPLACED": 1}, False)
        outcome = ReevaluationOutcome.objects.get(job=job)
        assert (outcome.appointment_ref, outcome.outcome, outcome.applied, outcome.status_before) == (
            held.ref, Outcome.HOLD_REPLACED, True, AppointmentStatus.HELD)
        new = Appointment.objects.get(ref=outcome.replacement_ref)
        assert (new.status, new.practitioner_id, new.starts_at, new.patient_id) == (
            AppointmentStatus.HELD, world.dr_b.pk, held.starts_at, held.patient_id)
        assert CapacityAllocation.objects.filter(appointment=new, active=True).count() == 1
        held.refresh_from_db()
        assert (held.status, held.cancel_reason_code, held.cancelled_by, held.version) == (
            AppointmentStatus.CANCELLED, "RESCHEDULED", "system:reevaluation", 2)
        assert not CapacityAllocation.objects.filter(appointment=held, active=True).exists()
        notice = OutboxMessage.objects.get(aggregate_ref=job_ref, topic="reevaluation.job_completed")
        assert notice.recipient_ref == held.patient.ref
        assert notice.payload["outcome_counts"] == {"HOLD_REPLACED": 1}
    assert _confirmed() == confirmed
    cancels = [q for q in queries if "cancel_reason = v.reason" in q["sql"]]
    assert len(cancels) == 1  # the four holds in one statement


def test_the_held_batch_costs_the_same_statements_for_two_jobs_as_for_five(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    _held_scopes(world, crm, 2, first_hour=6)
    assert rounds.work_round(client=AssessmentClient()) == {JobState.COMPLETED: 2}  # makes the dispatch cursor
    _held_scopes(world, crm, 2, first_hour=9)
    with CaptureQueriesContext(connection) as two:
        assert rounds.work_round(client=AssessmentClient()) == {JobState.COMPLETED: 2}
    _held_scopes(world, crm, 5, first_hour=12)
    with CaptureQueriesContext(connection) as five:
        assert rounds.work_round(client=AssessmentClient()) == {JobState.COMPLETED: 5}
    assert len(five) == len(two)


def test_a_taken_slot_undoes_the_batch_and_each_job_decides_alone(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    scopes = _held_scopes(world, crm, 3)
    taken = scopes[2][1]  # the last: the fallback's proposal then holds no time another job needs
    appointment_book(clinic=world.clinic, patient=world.other_patient, practitioner=world.dr_b,
                     treatment=world.treatment, starts_at=taken.starts_at, status="CONFIRMED")
    assert rounds.work_round(client=AssessmentClient()) == {JobState.COMPLETED: 3}
    outcomes = {o.appointment_ref: o.outcome for o in ReevaluationOutcome.objects.filter(
        appointment_ref__in=[held.ref for _, held in scopes])}
    assert outcomes == {
        scopes[0][1].ref: Outcome.HOLD_REPLACED,
        scopes[1][1].ref: Outcome.HOLD_REPLACED,
        taken.ref: Outcome.FALLBACK_TO_PROPOSED,
    }
    taken.refresh_from_db()
    assert taken.status == AppointmentStatus.PROPOSED
    assert Appointment.objects.filter(starts_at=taken.starts_at, practitioner=world.dr_b).count() == 1


def test_a_future_confirmed_that_no_longer_fits_takes_the_one_by_one_path(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    scopes = _held_scopes(world, crm, 2)
    confirmed = world.book("CONFIRMED", 15, patient=scopes[0][1].patient)  # dr_a: no longer fits
    before = _confirmed()
    assert rounds.work_round(client=AssessmentClient()) == {JobState.COMPLETED: 2}
    job = ReevaluationJob.objects.get(ref=scopes[0][0])
    assert job.outcome_counts == {"CONFIRMED_CHANGE_PROPOSED": 1, "HOLD_REPLACED": 1}
    assert ReevaluationOutcome.objects.get(job=job, appointment_ref=confirmed.ref).proposal is not None
    assert _confirmed() == before


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_a_held_batch_racing_staff_confirming_one_of_its_holds_never_does_both(crm):
    """Staff confirm a HELD appointment while a round replaces it: the allocation and row locks and the
    version check let one win. Confirmed first: that job's hold stays CONFIRMED (SKIPPED_INELIGIBLE); the
    batch first: the confirm is refused and the hold is replaced."""
    clinic = f.ClinicFactory()
    world = ReevaluationWorld(clinic)
    rf.enable(clinic, "APPLY_PROPOSED_AND_HELD")
    scopes = _held_scopes(world, crm, 4)
    contested = scopes[2][1]

    def work(i):
        if i == 0:
            return rounds.work_round(client=AssessmentClient())
        return appointment_set_status(clinic=clinic, appointment_ref=contested.ref, target="CONFIRMED")

    round_result, confirm = race(work, 2)
    assert round_result == {JobState.COMPLETED: 4}, round_result
    contested.refresh_from_db()
    outcome = ReevaluationOutcome.objects.get(appointment_ref=contested.ref)
    if contested.status == AppointmentStatus.CONFIRMED:
        assert not isinstance(confirm, Exception)
        assert (outcome.outcome, outcome.replacement_ref) == (Outcome.SKIPPED_INELIGIBLE, "")
        assert CapacityAllocation.objects.filter(appointment=contested, active=True).count() == 1
    else:
        assert isinstance(confirm, Exception), confirm
        assert (contested.status, outcome.outcome) == (AppointmentStatus.CANCELLED, Outcome.HOLD_REPLACED)
    others = [held.ref for _, held in scopes if held.ref != contested.ref]
    assert set(ReevaluationOutcome.objects.filter(appointment_ref__in=others).values_list("outcome", flat=True)) == {
        Outcome.HOLD_REPLACED}
    assert CapacityAllocation.objects.filter(active=True, practitioner=world.dr_b).count() == (
        4 if contested.status == AppointmentStatus.CANCELLED else 3)


def test_a_batched_replacement_keeps_the_holds_resource_as_one_by_one_does(world, crm):
    """A HELD appointment with a room, moved to another practitioner by an assessment that needs no resource: the
    replacement keeps the room, in a round's batch exactly as one job at a time (``decisions.replacement_specs``)."""
    from reevaluation.jobs import worker as worker_module
    from reevaluation.services import dispatch_round

    rf.enable(world.clinic, "APPLY_PROPOSED_AND_HELD")
    batched = []
    for i in range(2):
        fp = rf.fingerprint(f"room-{world.clinic.pk}-{i}")
        patient = f.PatientFactory(clinic=world.clinic, crm_fingerprint=fp)
        held = world.book("HELD", 8 + i, patient=patient, resource=world.room)
        post_event(world, fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
        batched.append(held)
    with CaptureQueriesContext(connection) as queries:
        assert rounds.work_round(client=AssessmentClient()) == {JobState.COMPLETED: 2}
    assert len([q for q in queries if "cancel_reason = v.reason" in q["sql"]]) == 1  # the batch ran
    alone = world.book("HELD", 12, resource=world.room)
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    [claim] = dispatch_round(for_worker=True)
    assert worker_module.job_run_claimed(claim, client=AssessmentClient()) == JobState.COMPLETED
    for held in [*batched, alone]:
        outcome = ReevaluationOutcome.objects.get(appointment_ref=held.ref)
        new = Appointment.objects.get(ref=outcome.replacement_ref)
        assert (outcome.outcome, new.practitioner_id, new.resource_id) == (
            Outcome.HOLD_REPLACED, world.dr_b.pk, world.room.pk)
        assert CapacityAllocation.objects.get(appointment=new, active=True).resource_id == world.room.pk
