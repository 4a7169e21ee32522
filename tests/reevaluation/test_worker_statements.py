"""Round trips per job: a worker running its own claim does no lease take-over and no re-read, and a
scope with nothing to decide costs five statements (issue #15 part 2)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.models import OutboxMessage
from reevaluation.assessment import AssessmentClient
from reevaluation.jobs import worker as worker_module
from reevaluation.models import JobState, ReevaluationJob
from reevaluation.rounds import services as rounds
from reevaluation.services import dispatch_round
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event

pytestmark = pytest.mark.django_db


def test_a_no_op_scope_job_runs_in_five_statements(world, crm):
    """Read the scope's PROPOSED/HELD appointments (none), complete the job fenced, advance the policy
    (returning the mode), settle older needs-staff asks, write the outbox row."""
    rf.enable(world.clinic, "DRY_RUN")
    result = post_event(world, world.fp, 1, crm)
    [claim] = dispatch_round(for_worker=True)
    assert claim.job is not None and claim.owner.startswith("worker:")
    client = AssessmentClient()
    with CaptureQueriesContext(connection) as queries:
        state = worker_module.job_run_claimed(claim, client=client)
    assert state == JobState.COMPLETED
    # The test runs inside a transaction, so the write-back's BEGIN/COMMIT show as a savepoint.
    sql = [q["sql"] for q in queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    assert [s.split()[0] for s in sql] == ["SELECT", "UPDATE", "UPDATE", "UPDATE", "INSERT"], [s[:90] for s in sql]
    job = ReevaluationJob.objects.get(ref=result.job_ref)
    assert (job.state, job.lease_owner, job.outcome_counts, job.needs_staff) == (JobState.COMPLETED, "", {}, False)
    assert OutboxMessage.objects.filter(aggregate_ref=job.ref, topic="reevaluation.job_completed").count() == 1


def test_a_newer_revision_makes_the_quiet_write_back_stale(world, crm):
    rf.enable(world.clinic, "DRY_RUN")
    first = post_event(world, world.fp, 1, crm)
    [claim] = dispatch_round(for_worker=True)
    post_event(world, world.fp, 2, crm)  # arrives while revision 1 runs
    assert worker_module.job_run_claimed(claim, client=AssessmentClient()) == JobState.STALE
    assert ReevaluationJob.objects.get(ref=first.job_ref).state == JobState.STALE
    assert not OutboxMessage.objects.filter(aggregate_ref=first.job_ref).exists()


def test_work_round_claims_and_runs_inline(world, crm):
    rf.enable(world.clinic, "DRY_RUN")
    post_event(world, world.fp, 1, crm)
    assert rounds.work_round(client=AssessmentClient()) == {JobState.COMPLETED: 1}
    assert rounds.work_round(client=AssessmentClient()) == {}


def test_work_round_completes_a_rounds_quiet_jobs_together(world, crm):
    """Quiet scopes share one five-statement write-back; a scope with a HELD appointment takes the
    one-by-one path (its outcome recorded); every job completes once with its outbox row."""
    rf.enable(world.clinic, "DRY_RUN")
    world.book("HELD", 11)
    quiet = [rf.fingerprint(f"quiet-{world.clinic.pk}-{i}") for i in range(3)]
    refs = [post_event(world, fp, 1, crm).job_ref for fp in quiet]
    busy = post_event(world, world.fp, 1, crm).job_ref
    with CaptureQueriesContext(connection) as queries:
        assert rounds.work_round(client=AssessmentClient()) == {JobState.COMPLETED: 4}
    jobs = ReevaluationJob.objects.filter(ref__in=[*refs, busy])
    assert {j.state for j in jobs} == {JobState.COMPLETED}
    assert ReevaluationJob.objects.get(ref=busy).outcomes.count() == 1
    assert OutboxMessage.objects.filter(aggregate_ref__in=[*refs, busy]).count() == 4
    completions = [q for q in queries if "SET state = 'COMPLETED'" in q["sql"] and "unnest" in q["sql"]]
    assert len(completions) == 1  # the three quiet jobs in one statement


def test_a_policy_that_would_move_back_undoes_the_batch_and_each_job_decides(world, crm):
    from reevaluation.models import ClinicReevaluationSettings

    rf.enable(world.clinic, "DRY_RUN")
    ClinicReevaluationSettings.objects.filter(clinic=world.clinic).update(policy_ref="demo-policy", policy_generation=9)
    ref = post_event(world, world.fp, 1, crm).job_ref  # the stub's document says generation 1
    assert rounds.work_round(client=AssessmentClient()) == {JobState.FAILED: 1}
    job = ReevaluationJob.objects.get(ref=ref)
    assert (job.state, job.last_failure_code) == (JobState.FAILED, "ASSESSMENT_POLICY_STALE")
    assert not OutboxMessage.objects.filter(aggregate_ref=ref).exists()


def test_the_dispatch_command_runs_its_own_claims(world, crm):
    from io import StringIO

    from django.core.management import call_command

    rf.enable(world.clinic, "DRY_RUN")
    ref = post_event(world, world.fp, 1, crm).job_ref
    out = StringIO()
    call_command("reevaluation_dispatch", "--run", stdout=out)
    assert f"{ref} COMPLETED" in out.getvalue()
    assert ReevaluationJob.objects.get(ref=ref).state == JobState.COMPLETED
