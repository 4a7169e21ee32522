"""The transition tables are the source of truth: every (from, to) pair of every state-bearing model,
tried against a real row through ``common.cas``, succeeds exactly when the table lists it."""

from __future__ import annotations

import itertools

import pytest
import time_machine
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from common.cas import cas_update, cas_update_all, state_machine, transition_sources
from common.errors import Conflict, VersionConflict
from reevaluation.models import ClinicReevaluationSettings, JobState, ReevaluationHead, ReevaluationJob
from scheduling.models import Appointment, CapacityHold
from tests.reevaluation import factories as rf
from tests.waitlist.factories import NOW
from tests.worlds import waitlist_world
from waitlist import services
from waitlist.models import Offer, Vacancy, WaitlistEntry

MODELS = [WaitlistEntry, Offer, Vacancy, Appointment, CapacityHold, ReevaluationJob, ClinicReevaluationSettings]


@pytest.fixture
def rows(db):
    """One real row of every model with a table: an offer made by dispatch (vacancy, offer, hold, entry,
    the cancelled appointment), a reevaluation job and the clinic's reevaluation settings."""
    with time_machine.travel(NOW, tick=False):
        world = waitlist_world()
        entry = world.waiting()
        appointment = world.confirmed(NOW.replace(day=3, hour=10))
        _, vacancy = services.appointment_cancel_with_vacancy(
            clinic=world.clinic, appointment_ref=appointment.ref, reason="cancelled"
        )
        offer = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer
    assert offer is not None
    return {
        WaitlistEntry: entry,
        Offer: offer,
        Vacancy: vacancy,
        Appointment: appointment,
        CapacityHold: offer.hold,
        ReevaluationJob: rf.bulk_jobs(world.clinic, 1)[0],
        ClinicReevaluationSettings: rf.enable(world.clinic),
    }


def _snapshot(model, pk) -> dict:
    return model.objects.filter(pk=pk).values().get()


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_only_the_tables_moves_succeed(rows, model):
    field, table = state_machine(model)
    pk = rows[model].pk
    tried = 0
    for source, target in itertools.product(table, repeat=2):
        with transaction.atomic():
            sid = transaction.savepoint()
            model.objects.filter(pk=pk).update(**{field: source}, version=1)  # the test's own setup
            row = model.objects.get(pk=pk)
            before = _snapshot(model, pk)
            allowed = target in table[source] or (source == target and bool(table[source]))
            if allowed:
                cas_update(row, **{field: target})
                after = _snapshot(model, pk)
                assert (after[field], after["version"]) == (target, 2), (source, target)
                assert (getattr(row, field), row.version) == (target, 2)
            else:
                with pytest.raises(Conflict) as info:
                    cas_update(row, **{field: target})
                assert info.value.code.endswith("_TRANSITION_INVALID"), (source, target, info.value.code)
                assert _snapshot(model, pk) == before, (source, target)
            transaction.savepoint_rollback(sid)
        tried += 1
    assert tried == len(table) ** 2


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_a_stale_status_is_refused_by_the_update_itself(rows, model):
    """The in-memory copy says a move is fine; the row moved on: the one UPDATE matches nothing."""
    field, table = state_machine(model)
    pk = rows[model].pk
    source, target, other = next(
        (s, t, o)
        for s in sorted(table)
        for t in sorted(table[s])
        for o in sorted(table)
        if o not in (s, t) and t not in table[o]
    )
    model.objects.filter(pk=pk).update(**{field: source}, version=1)
    row = model.objects.get(pk=pk)
    model.objects.filter(pk=pk).update(**{field: other})  # someone else's write, version unchanged
    before = _snapshot(model, pk)
    with pytest.raises(Conflict) as info:
        cas_update(row, **{field: target})
    assert info.value.code == "STATE_CONFLICT"
    assert _snapshot(model, pk) == before


def test_the_success_path_is_one_statement(rows):
    job = rows[ReevaluationJob]
    with CaptureQueriesContext(connection) as queries:
        cas_update(ReevaluationJob, pk=job.pk, fence={"attempts": 0}, state=JobState.RUNNING)
    assert len(queries) == 1 and queries[0]["sql"].startswith("UPDATE")


def test_a_fence_that_no_longer_holds_changes_nothing(rows):
    job = rows[ReevaluationJob]
    before = _snapshot(ReevaluationJob, job.pk)
    with pytest.raises(Conflict) as info:
        cas_update(ReevaluationJob, pk=job.pk, fence={"lease_owner": "someone"}, state=JobState.RUNNING)
    assert info.value.code == "FENCE_LOST"
    assert _snapshot(ReevaluationJob, job.pk) == before


def test_a_row_without_a_status_column_is_guarded_by_its_version(rows):
    job = rows[ReevaluationJob]
    head = ReevaluationHead.objects.create(
        tenant_group_id=job.tenant_group_id, clinic_id=job.clinic_id, fingerprint=job.fingerprint,
        revision=1, assessment_ref="a", assessment_hash="0" * 64, event_id=job.event_id,
    )
    stale = ReevaluationHead.objects.get(pk=head.pk)
    cas_update(head, revision=2)
    with pytest.raises(VersionConflict):
        cas_update(stale, revision=3)
    assert ReevaluationHead.objects.filter(pk=head.pk).values_list("revision", "version").get() == (2, 2)


def test_bulk_moves_only_rows_the_table_allows(rows):
    job = rows[ReevaluationJob]
    more = rf.bulk_jobs(job.clinic, 2)
    ReevaluationJob.objects.filter(pk=more[0].pk).update(state=JobState.COMPLETED)
    moved = cas_update_all(
        ReevaluationJob.objects.filter(pk__in=[job.pk, *(m.pk for m in more)]), state=JobState.STALE
    )
    assert moved == 2
    assert ReevaluationJob.objects.get(pk=more[0].pk).state == JobState.COMPLETED
    with pytest.raises(Conflict):
        transition_sources(ReevaluationJob, JobState.RUNNING, [JobState.COMPLETED])
