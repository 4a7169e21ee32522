"""The rollback readout (issue 28 part 2): the seed's invariants read from state and history, per clinic or for
every clinic in scope, through the selector, the API, the console and the management command."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from reevaluation.models import MutationMode, Outcome, ReevaluationOutcome
from reevaluation.modes.readout import rollback_readout
from reevaluation.proposals.models import AppointmentProposal
from reevaluation.proposals.services import proposal_answer, proposal_confirm, proposal_shown, shown_digest
from scheduling.models import Appointment, AppointmentStatus, CapacityAllocation, Role
from tests import factories as f
from tests.conftest import seoul, token_client
from tests.operations.conftest import signed_in
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event, run_round

pytestmark = pytest.mark.django_db
DAY_BEFORE = seoul(4, 9)


@pytest.fixture(autouse=True)
def confirmed_unchanged():
    """This module plants CONFIRMED changes on purpose (the readout must find them), so the package's guard
    that no CONFIRMED row changes during a test is switched off here; every other module keeps it."""
    yield []


def run_apply_then_roll_back(world, crm):
    """PROPOSED 09:00 and HELD 11:00 with Dr A; the CRM requires Dr B; APPLY both, then roll back."""
    rf.enable(world.clinic, MutationMode.APPLY_PROPOSED_AND_HELD)
    world.proposed = world.book("PROPOSED", 9)
    world.held = world.book("HELD", 11)
    world.confirmed = world.book("CONFIRMED", 16, practitioner=world.dr_b)  # fits: no proposal
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    assert run_round() == ["COMPLETED"]
    rf.enable(world.clinic, MutationMode.DISABLED, drain="DRAINED")


def test_a_clean_rollback_holds_and_says_what_finished(world, crm):
    run_apply_then_roll_back(world, crm)
    readout = rollback_readout(clinic=world.clinic)
    assert readout["ok"] is True, readout
    assert readout["checks"] == {"switch_off": True, "drained_without_leases": True, "no_confirmed_changed": True,
                                 "no_held_lost": True}
    assert readout["rows"]["jobs"]["total"] == 1 and readout["rows"]["outcomes"]["total"] == 2
    assert readout["rows"]["inbox"]["total"] == 1 and readout["rows"]["outbox"]["total"] >= 1
    assert readout["jobs"]["finished_since"] == {"COMPLETED": 1} and readout["jobs"]["remaining"] == 0


def test_it_reports_a_planted_confirmed_change_and_a_lost_held_allocation(world, crm):
    run_apply_then_roll_back(world, crm)
    # Planted: a CONFIRMED visit cancelled as if by reevaluation (no PROPOSED/HELD decision explains it) ...
    victim = world.book("CONFIRMED", 18)
    Appointment.objects.filter(pk=victim.pk).update(
        status=AppointmentStatus.CANCELLED, cancel_reason="reevaluation:superseded", updated_at=timezone.now())
    CapacityAllocation.objects.filter(appointment=victim).update(active=False)
    # ... and the HELD replacement's allocation dropped outside any atomic replacement.
    replacement = Appointment.objects.get(
        ref=ReevaluationOutcome.objects.get(appointment_ref=world.held.ref).replacement_ref)
    assert replacement.status == AppointmentStatus.HELD
    CapacityAllocation.objects.filter(appointment=replacement).update(active=False)

    readout = rollback_readout(clinic=world.clinic)
    assert readout["ok"] is False
    assert readout["checks"]["no_confirmed_changed"] is False and readout["checks"]["no_held_lost"] is False
    assert readout["confirmed_changed"]["items"] == [
        {"appointment": victim.ref, "finding": "CANCELLED_BY_REEVALUATION"}]
    assert {"appointment": replacement.ref, "finding": "HELD_WITHOUT_ALLOCATION"} in readout["held_lost"]["items"]
    assert {"appointment": world.held.ref, "finding": "REPLACEMENT_WITHOUT_ALLOCATION"} in readout["held_lost"]["items"]

    # The command says so too, and exits 1 so a script can gate on it.
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("reevaluation_rollback_readout", "--clinic", world.clinic.ref, stdout=out)
    assert exited.value.code == 1
    text = out.getvalue()
    assert "DOES NOT HOLD" in text and f"{victim.ref}:CANCELLED_BY_REEVALUATION" in text
    assert f"{replacement.ref}:HELD_WITHOUT_ALLOCATION" in text


def test_an_applied_outcome_on_a_confirmed_or_a_rewritten_confirmed_row_is_reported(world, crm):
    rf.enable(world.clinic, MutationMode.DRY_RUN)
    confirmed = world.book("CONFIRMED", 14)
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    run_round()
    outcome = ReevaluationOutcome.objects.get(appointment_ref=confirmed.ref)
    assert outcome.outcome == Outcome.CONFIRMED_CHANGE_PROPOSED and not outcome.applied
    rf.enable(world.clinic, MutationMode.DISABLED, drain="DRAINED")
    assert rollback_readout(clinic=world.clinic)["ok"] is True
    # Planted: the CONFIRMED row rewritten in place after the decision about it.
    with time_machine.travel(timezone.now() + timedelta(minutes=1), tick=False):
        confirmed.practitioner = world.dr_b
        confirmed.save()
    readout = rollback_readout(clinic=world.clinic)
    assert readout["confirmed_changed"]["items"] == [
        {"appointment": confirmed.ref, "finding": "CONFIRMED_ROW_REWRITTEN"}]
    # Planted: an applied outcome that claims a change to a CONFIRMED appointment.
    ReevaluationOutcome.objects.filter(pk=outcome.pk).update(applied=True, outcome=Outcome.PROPOSAL_SUPERSEDED)
    assert rollback_readout(clinic=world.clinic)["confirmed_changed"]["count"] == 1  # the same appointment, once


def test_a_swap_the_patient_chose_and_an_operator_confirmed_is_not_a_change_by_reevaluation(world, crm):
    with time_machine.travel(DAY_BEFORE, tick=True):
        rf.enable(world.clinic, MutationMode.APPLY_PROPOSED)
        world.book("CONFIRMED", 14)
        post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
        run_round()
        proposal = AppointmentProposal.objects.get()
        option = proposal.options.exclude(hold=None).first()
        proposal_answer(proposal_ref=proposal.ref, choice="ACCEPT", option_ref=option.ref,
                        digest=shown_digest(proposal_shown(proposal)), language="en")
        staff = f.user_with_role(world.clinic, Role.STAFF, username="swapper")
        proposal_confirm(clinic=world.clinic, proposal_ref=proposal.ref, actor=staff, reason="patient chose it")
        rf.enable(world.clinic, MutationMode.DISABLED, drain="DRAINED")
        readout = rollback_readout(clinic=world.clinic)
        assert readout["ok"] is True and readout["confirmed_changed"]["count"] == 0
        assert readout["confirmed_changed"]["consented_swaps"][0]["proposal"] == proposal.ref


def test_mode_and_drain_and_leases_are_read_not_assumed(world, crm):
    rf.enable(world.clinic, MutationMode.DRY_RUN)
    readout = rollback_readout(clinic=world.clinic)
    assert readout["checks"]["switch_off"] is False and readout["checks"]["drained_without_leases"] is False
    assert readout["mutation_mode"] == "DRY_RUN" and readout["drain_state"] == "ACTIVE"
    rf.bulk_jobs(world.clinic, 2)
    rf.enable(world.clinic, MutationMode.DISABLED, drain="DRAINED")
    readout = rollback_readout(clinic=world.clinic)
    assert readout["ok"] is True and readout["jobs"]["remaining"] == 2  # they wait: a rollback reverses nothing
    assert {j["state"] for j in readout["jobs"]["remaining_jobs"]} == {"PENDING"}


def test_the_api_reads_one_clinic_or_every_clinic_in_scope(world, crm, other_tenant_clinic):
    run_apply_then_roll_back(world, crm)
    staff = f.user_with_role(world.clinic, Role.STAFF, username="reader")
    client = token_client(staff)
    one = client.get(f"/api/v1/ops/profile-reevaluation/rollback?clinic={world.clinic.ref}")
    assert one.status_code == 200 and one.json()["ok"] is True and one.json()["clinic"] == world.clinic.ref
    every = client.get("/api/v1/ops/profile-reevaluation/rollback")
    assert every.status_code == 200 and [r["clinic"] for r in every.json()["items"]] == [world.clinic.ref]
    foreign = client.get(f"/api/v1/ops/profile-reevaluation/rollback?clinic={other_tenant_clinic.ref}")
    assert foreign.status_code == 404
    bad = client.get(f"/api/v1/ops/profile-reevaluation/rollback?clinic={world.clinic.ref}&since=yesterday")
    assert bad.status_code == 400 and bad.json()["code"] == "VALIDATION_ERROR"
    assert token_client().get("/api/v1/ops/profile-reevaluation/rollback").status_code == 401


def test_the_console_panel_and_the_command_baseline(world, crm, tmp_path):
    run_apply_then_roll_back(world, crm)
    staff = f.user_with_role(world.clinic, Role.STAFF, username="panel")
    url = reverse("console:reevaluation-rollback", kwargs={"clinic_ref": world.clinic.ref})
    panel = signed_in(staff).get(url, HTTP_HX_REQUEST="true")
    html = panel.content.decode()
    assert panel.status_code == 200 and 'data-testid="rollback-readout" data-ok="true"' in html
    page = signed_in(staff).get(reverse("console:reevaluation", kwargs={"clinic_ref": world.clinic.ref}))
    assert 'data-testid="rollback-panel"' in page.content.decode()
    saved = tmp_path / "baseline.json"
    out = StringIO()
    call_command("reevaluation_rollback_readout", "--clinic", world.clinic.ref, "--save", str(saved), stdout=out)
    assert "rollback holds" in out.getvalue()
    assert json.loads(saved.read_text())[0]["clinic"] == world.clinic.ref
    out = StringIO()
    call_command("reevaluation_rollback_readout", "--clinic", world.clinic.ref, "--baseline", str(saved), stdout=out)
    assert "preserved     jobs=ok outcomes=ok inbox=ok quarantine=ok outbox=ok audit=ok" in out.getvalue()


def test_the_mode_comparison_shows_what_apply_would_have_done(world, crm, settings):
    from reevaluation.services import mode_set

    admin = f.user_with_role(world.clinic, Role.ADMIN, username="roller")
    rf.enable(world.clinic, MutationMode.DRY_RUN)
    world.book("PROPOSED", 9)
    world.book("HELD", 11)
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    run_round()
    before = Appointment.objects.order_by("pk").values_list("ref", "status", "practitioner_id")
    before = list(before)
    client = token_client(f.user_with_role(world.clinic, Role.STAFF, username="looker"))
    url = f"/api/v1/ops/profile-reevaluation/mode-comparison?clinic={world.clinic.ref}"
    body = client.get(url).json()
    assert body["current_mode"] == "DRY_RUN"
    assert body["by_mode"]["DRY_RUN"]["outcomes"]["PROPOSAL_SUPERSEDED"] == {"recorded": 1, "applied": 0}
    assert body["dry_run_would_apply"]["APPLY_PROPOSED"] == {"PROPOSAL_SUPERSEDED": 1}
    assert body["dry_run_would_apply"]["APPLY_PROPOSED_AND_HELD"] == {"PROPOSAL_SUPERSEDED": 1, "HOLD_REPLACED": 1}
    assert list(Appointment.objects.order_by("pk").values_list("ref", "status", "practitioner_id")) == before
    # Then APPLY: the same revision's decision, applied this time; the comparison reads both side by side.
    mode_set(clinic=world.clinic, mode="APPLY_PROPOSED", actor=admin, reason="rollout step 2")
    post_event(world, world.fp, 2, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    run_round()
    body = client.get(url).json()
    assert body["mode_changes"][0]["from"] == "DRY_RUN" and body["mode_changes"][0]["to"] == "APPLY_PROPOSED"
    assert body["by_mode"]["APPLY_PROPOSED"]["outcomes"]["PROPOSAL_SUPERSEDED"] == {"recorded": 1, "applied": 1}
    assert client.get("/api/v1/ops/profile-reevaluation/mode-comparison").status_code == 400
