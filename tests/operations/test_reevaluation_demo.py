"""``reevaluation.demo.seed_demo``: modes through ``mode_set``, jobs in every state, idempotent."""

from __future__ import annotations

import pytest

from common.models import AuditEntry
from reevaluation.demo import seed_demo
from reevaluation.models import ClinicReevaluationSettings, InboxEvent, QuarantineCase, ReevaluationJob
from scheduling.demo import seed_scheduling

pytestmark = pytest.mark.django_db


def counts() -> tuple:
    return (
        ReevaluationJob.objects.count(),
        InboxEvent.objects.count(),
        QuarantineCase.objects.count(),
        AuditEntry.objects.count(),
        list(ReevaluationJob.objects.order_by("pk").values_list("ref", "state")),
    )


def test_seed_demo_shows_every_state_and_a_second_run_adds_nothing():
    world = seed_scheduling()
    seed_demo(world)
    gangnam, lisbon = world["clinics"]
    modes = dict(ClinicReevaluationSettings.objects.values_list("clinic__ref", "mutation_mode"))
    assert modes == {gangnam.ref: "APPLY_PROPOSED_AND_HELD", lisbon.ref: "DRY_RUN"}
    audit = AuditEntry.objects.filter(action="reevaluation.mode_set")
    # The rollout order, one audited step at a time: three steps for Gangnam, one for Lisbon.
    assert audit.count() == 4 and {a.actor_id for a in audit} == {None}
    for clinic in (gangnam, lisbon):
        states = sorted(ReevaluationJob.objects.filter(clinic=clinic).values_list("state", flat=True))
        assert states == ["COMPLETED", "FAILED", "FAILED", "PENDING", "RETRY_WAIT", "STALE"], clinic.ref
        codes = set(ReevaluationJob.objects.filter(clinic=clinic, state="FAILED").values_list(
            "last_failure_code", flat=True))
        assert codes == {"ASSESSMENT_TIMEOUT", "ASSESSMENT_HASH_MISMATCH"}
        reasons = set(QuarantineCase.objects.filter(clinic=clinic).values_list("reason_code", flat=True))
        assert reasons == {"ASSESSMENT_HASH_MISMATCH", "PRIVACY_BOUNDARY"}
        pending = ReevaluationJob.objects.get(clinic=clinic, state="PENDING")
        assert pending.priority_class == "HELD_PRESENT" and pending.revision == 3
    before = counts()
    seed_demo(seed_scheduling())
    assert counts() == before


def test_the_demo_clinics_are_working_after_the_seeded_privacy_stop():
    """The seeded privacy incident stops each demo clinic's consumer (audited); the demo resumes it, so the
    tour's ``make demo-event`` is worked on at beat's next round."""
    world = seed_scheduling()
    seed_demo(world)
    for clinic in world["clinics"]:
        row = ClinicReevaluationSettings.objects.get(clinic=clinic)
        assert row.drain_state == "ACTIVE", clinic.ref
    actions = list(AuditEntry.objects.filter(action__startswith="reevaluation.drain").values_list("action", flat=True))
    assert len(actions) >= 2  # each clinic's resume is audited
