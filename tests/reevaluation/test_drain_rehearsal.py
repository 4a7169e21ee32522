"""The drain rehearsal (issue 28 part 3): drain, wait for the leases to end (progress, timeout), show the
readout, resume; every move audited. Time is controlled: the wait's sleep is where a worker finishes."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from common.models import AuditEntry
from reevaluation.jobs import worker as worker_module
from reevaluation.management.commands import reevaluation_drain_rehearsal as rehearsal
from reevaluation.models import ClinicReevaluationSettings, JobState, ReevaluationJob
from reevaluation.services import dispatch_round
from scheduling.models import Role
from tests import factories as f
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event

pytestmark = pytest.mark.django_db


def drain_state(clinic) -> str:
    return ClinicReevaluationSettings.objects.get(clinic=clinic).drain_state


def test_the_rehearsal_drains_waits_for_the_lease_shows_the_readout_and_resumes(world, crm, monkeypatch):
    rf.enable(world.clinic, "DRY_RUN")
    world.book("PROPOSED", 9)
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    [claim] = dispatch_round()  # a worker holds the lease while the rehearsal starts
    admin = f.user_with_role(world.clinic, Role.ADMIN, username="rehearser")
    seen = []

    def the_worker_finishes(_seconds):
        """The wait's sleep: meanwhile the worker completes its job (and its lease ends)."""
        seen.append(drain_state(world.clinic))
        worker_module.job_run(job_id=claim.job_id, owner=claim.owner, attempt=claim.attempt)

    monkeypatch.setattr(rehearsal.time, "sleep", the_worker_finishes)
    out = StringIO()
    call_command("reevaluation_drain_rehearsal", "--clinic", world.clinic.ref, "--actor-username", "rehearser",
                 "--reason", "quarterly drain drill", stdout=out)
    text = out.getvalue()
    assert seen == ["DRAINING"]  # no new claims while the running job finished
    assert "draining (1 lease(s) active)" in text and "waiting: 1 lease(s) active" in text
    assert "DRAINED after" in text and "drain_state=DRAINED active_leases=0" in text
    assert "CONFIRMED     ok" in text and "HELD          ok" in text
    assert "preserved     jobs=ok outcomes=ok inbox=ok quarantine=ok outbox=ok audit=ok" in text
    assert "resumed: ACTIVE" in text and text.rstrip().endswith("rehearsal passed")
    assert ReevaluationJob.objects.get(pk=claim.job_id).state == JobState.COMPLETED
    assert drain_state(world.clinic) == "ACTIVE"
    moves = list(AuditEntry.objects.filter(action="reevaluation.drain_set").order_by("pk").values_list(
        "result", flat=True))
    assert moves == [{"from": "ACTIVE", "to": "DRAINING"}, {"from": "DRAINED", "to": "ACTIVE"}]
    [audit] = AuditEntry.objects.filter(action="reevaluation.drain_rehearsal")
    assert audit.actor == admin and audit.result["ok"] is True and audit.result["leases_at_start"] == 1
    assert audit.result["drained"] is True and audit.result["resumed"] is True


def test_a_lease_that_does_not_end_in_time_fails_the_rehearsal_and_still_resumes(world, crm, monkeypatch):
    rf.enable(world.clinic, "DRY_RUN")
    world.book("PROPOSED", 9)
    post_event(world, world.fp, 1, crm)
    dispatch_round()
    f.user_with_role(world.clinic, Role.ADMIN, username="rehearser2")
    monkeypatch.setattr(rehearsal.time, "sleep", lambda _s: None)
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("reevaluation_drain_rehearsal", "--clinic", world.clinic.ref, "--actor-username",
                     "rehearser2", "--reason", "drill with a stuck worker", "--timeout", "0", stdout=out)
    assert exited.value.code == 1
    assert "TIMED OUT while DRAINING" in out.getvalue() and "rehearsal FAILED" in out.getvalue()
    assert drain_state(world.clinic) == "ACTIVE"
    assert AuditEntry.objects.get(action="reevaluation.drain_rehearsal").result["drained"] is False


def test_only_an_admin_of_an_active_clinic_rehearses(world):
    rf.enable(world.clinic, "DRY_RUN")
    f.user_with_role(world.clinic, Role.STAFF, username="just-staff")
    with pytest.raises(CommandError):
        call_command("reevaluation_drain_rehearsal", "--clinic", world.clinic.ref, "--actor-username", "just-staff",
                     "--reason", "not allowed here", stdout=StringIO())
    f.user_with_role(world.clinic, Role.ADMIN, username="boss")
    rf.enable(world.clinic, "DRY_RUN", drain="DRAINED")
    with pytest.raises(CommandError, match="not ACTIVE"):
        call_command("reevaluation_drain_rehearsal", "--clinic", world.clinic.ref, "--actor-username", "boss",
                     "--reason", "already drained", stdout=StringIO())
    assert not AuditEntry.objects.filter(action__startswith="reevaluation.drain").exists()
