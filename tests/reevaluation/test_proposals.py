"""Proposal → acceptance → confirmation (issue 28): a CONFIRMED appointment that no longer fits is never
changed by a job; the patient gets a proposal (times held where capacity allows), answers on the proposal
page (consent evidence), and an operator's confirmation swaps the appointment atomically."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.core import mail
from django.test import Client

from common.errors import Conflict, SlotOccupied
from common.models import AuditEntry, OutboxMessage
from common.outbox import outbox_deliver_due
from reevaluation.models import Outcome, ReevaluationOutcome
from reevaluation.proposals.models import AppointmentProposal, ProposalConsent, ProposalState
from reevaluation.proposals.services import proposal_answer, proposal_confirm, proposals_expire
from reevaluation.proposals.tokens import proposal_link
from scheduling.models import (
    Appointment,
    AppointmentStatus,
    CapacityAllocation,
    CapacityHold,
    HoldStatus,
    Role,
)
from scheduling.services import appointment_book
from tests import factories as f
from tests.conftest import assert_no_pii, race, seoul, token_client
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event, run_round
from tests.worlds import ReevaluationWorld

pytestmark = pytest.mark.django_db

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
DIGEST = re.compile(r'name="digest" value="([0-9a-f]{64})"')
LINK = re.compile(r"https?://[^/\s]+(/claim/rp-[^/\s]+/)")
#: The day before the visit: the proposal lives 24 h but never past the appointment's start.
DAY_BEFORE = seoul(4, 9)


def propose(world, crm, *, hour=14, mode="APPLY_PROPOSED"):
    """A CONFIRMED visit with Dr A; the CRM now requires Dr B: one job run makes a proposal."""
    rf.enable(world.clinic, mode)
    world.confirmed = world.book("CONFIRMED", hour)
    result = post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    assert run_round() == ["COMPLETED"]
    return result.job_ref


def confirmed_row(appt) -> dict:
    return Appointment.objects.filter(pk=appt.pk).values().get()


def page_post(client: Client, path: str, choice: str, option: str = "", **extra):
    page = client.get(path)
    html = page.content.decode()
    data = {"csrfmiddlewaretoken": CSRF.search(html).group(1), "digest": DIGEST.search(html).group(1),
            "choice": choice, "option": option, **extra}
    response = client.post(path, data)
    response.sent = data  # type: ignore[attr-defined]  # a double submit re-posts exactly this
    return response


def path_of(proposal) -> str:
    return LINK.search(proposal_link(proposal)).group(1)


@time_machine.travel(DAY_BEFORE, tick=True)
def test_confirmed_that_no_longer_fits_gets_a_proposal_the_patient_accepts_and_the_operator_confirms(world, crm):
    world.clinic.settings = {"notification": {"provider": "email"}}
    world.clinic.save(update_fields=["settings"])
    job_ref = propose(world, crm)
    before = confirmed_row(world.confirmed)

    # The job changed nothing of the CONFIRMED visit: it made a proposal, linked from the outcome.
    outcome = ReevaluationOutcome.objects.get(job__ref=job_ref, appointment_ref=world.confirmed.ref)
    assert (outcome.outcome, outcome.applied, outcome.status_before) == (
        Outcome.CONFIRMED_CHANGE_PROPOSED, True, AppointmentStatus.CONFIRMED)
    proposal = outcome.proposal
    assert proposal is not None and proposal.state == ProposalState.OPEN and proposal.needs_operator
    assert (outcome.assessment_ref, outcome.assessment_hash) == (proposal.assessment_ref, proposal.assessment_hash)
    assert proposal.job.ref == job_ref and proposal.assessment_hash == proposal.job.assessment_hash
    # 24 h (REEVALUATION_PROPOSAL_HOURS), never past the visit's start.
    assert abs(proposal.expires_at - (DAY_BEFORE + timedelta(hours=24))) < timedelta(minutes=1)
    options = list(proposal.options.order_by("starts_at"))
    assert [o.starts_at for o in options] == [seoul(5, 13, 30), seoul(5, 14), seoul(5, 14, 30)]
    assert all(o.practitioner == world.dr_b for o in options)
    # 14:00 overlaps the patient's own visit (the patient-overlap constraint): offered, not held.
    assert [o.hold_note for o in options] == ["", "OVERLAPS_CURRENT", ""]
    assert [o.hold.status if o.hold else None for o in options] == [HoldStatus.ACTIVE, None, HoldStatus.ACTIVE]
    assert all(o.hold.purpose == "REEVALUATION_PROPOSAL" for o in options if o.hold)
    assert confirmed_row(world.confirmed) == before

    # The patient is told through the outbox, with the page's link and the opt-out link.
    assert outbox_deliver_due(worker="test") == {"SENT": 1}
    [sent] = mail.outbox
    assert sent.to == [world.patient.email]
    assert "/claim/rp-" in sent.body and "/optout/" in sent.body
    path = LINK.search(sent.body).group(1)

    # The page: the clinic, the treatment, the times in the clinic's zone, no patient data.
    client = Client(enforce_csrf_checks=True)
    page = client.get(path)
    html = page.content.decode()
    assert page.status_code == 200 and world.clinic.name in html and "(Seoul time)" in html
    assert 'value="ACCEPT"' in html and 'value="KEEP"' in html and 'value="CALL"' in html
    assert_no_pii(html, [world.patient])

    chosen = options[2]  # 14:30, held
    accepted = page_post(client, path, "ACCEPT", chosen.ref)
    assert accepted.status_code == 200 and 'data-state="ACCEPTED"' in accepted.content.decode()
    proposal.refresh_from_db()
    assert proposal.state == ProposalState.ACCEPTED and proposal.chosen_option == chosen
    # The other held time is released; the chosen one stays held; the visit is still as it was.
    assert CapacityHold.objects.get(pk=options[0].hold_id).status == HoldStatus.RELEASED
    assert CapacityHold.objects.get(pk=chosen.hold_id).status == HoldStatus.ACTIVE
    assert confirmed_row(world.confirmed) == before
    [consent] = ProposalConsent.objects.filter(proposal=proposal)
    assert (consent.choice, consent.option, consent.channel) == ("ACCEPT", chosen, "PROPOSAL_PAGE")
    assert [o["option"] for o in consent.shown["options"]] == [o.ref for o in options]
    assert consent.shown["current"]["appointment"] == world.confirmed.ref
    assert (consent.state_before, consent.state_after) == ("OPEN", "ACCEPTED")
    # A double submit records nothing new.
    again = client.post(path, accepted.sent)
    assert again.status_code == 200 and ProposalConsent.objects.filter(proposal=proposal).count() == 1

    # The operator confirms (STAFF, per the role registry) through the API: the swap, in one transaction.
    staff = f.user_with_role(world.clinic, Role.STAFF, username="desk")
    response = token_client(staff).post(
        f"/api/v1/clinics/{world.clinic.ref}/reevaluation/proposals/{proposal.ref}/confirm",
        {"reason": "patient chose 14:30 on the page"}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "APPLIED" and body["consents"][0]["consent"] == consent.ref
    assert body["outcomes"][0]["outcome_ref"] == outcome.ref
    old = Appointment.objects.get(pk=world.confirmed.pk)
    new = Appointment.objects.get(ref=body["result_appointment"])
    assert old.status == AppointmentStatus.CANCELLED and old.cancel_reason == f"reevaluation:proposal {proposal.ref}"
    assert (old.cancel_reason_code, old.cancelled_by) == ("RESCHEDULED", "staff:desk")  # who confirmed it
    assert (new.status, new.starts_at, new.practitioner) == (AppointmentStatus.CONFIRMED, seoul(5, 14, 30), world.dr_b)
    assert not CapacityAllocation.objects.filter(appointment=old, active=True).exists()
    [allocation] = CapacityAllocation.objects.filter(appointment=new, active=True)
    hold = CapacityHold.objects.get(pk=chosen.hold_id)
    assert allocation.hold_id == hold.pk and hold.status == HoldStatus.CONSUMED and hold.appointment == new
    audit = AuditEntry.objects.get(action="reevaluation.proposal_confirm")
    assert audit.actor == staff and audit.result["consent"] == consent.ref and audit.result["to"] == new.ref
    assert audit.result["assessment_hash"] == proposal.assessment_hash
    # From the appointment's end: both the old and the new visit lead to the proposal and its assessment.
    for ref in (old.ref, new.ref):
        [row] = token_client(staff).get(
            f"/api/v1/clinics/{world.clinic.ref}/reevaluation/proposals?appointment={ref}").json()["items"]
        assert row["proposal"] == proposal.ref and row["assessment_hash"] == proposal.assessment_hash
    # The patient hears of the new time: the notice is delivered with the confirmed visit and the opt-out link.
    assert OutboxMessage.objects.filter(topic="reevaluation.proposal_applied", aggregate_ref=proposal.ref).exists()
    mail.outbox.clear()
    outbox_deliver_due(worker="test")
    [applied] = [m for m in mail.outbox if m.subject.startswith("Your new time at")]
    assert f"Your {new.treatment.name} is now confirmed on" in applied.body
    assert "/optout/" in applied.body and world.confirmed.ref not in applied.body
    # A replay of the same command answers the same; a second confirmation is refused.
    replay = token_client(staff).post(
        f"/api/v1/clinics/{world.clinic.ref}/reevaluation/proposals/{proposal.ref}/confirm",
        {"reason": "patient chose 14:30 on the page"}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert replay.content == response.content
    second = token_client(staff).post(
        f"/api/v1/clinics/{world.clinic.ref}/reevaluation/proposals/{proposal.ref}/confirm",
        {"reason": "again please"}, format="json", HTTP_IDEMPOTENCY_KEY="k2")
    assert second.status_code == 409 and second.json()["code"] == "PROPOSAL_ALREADY_APPLIED"


def test_a_dry_run_records_the_would_be_proposal_and_holds_nothing(world, crm):
    job_ref = propose(world, crm, mode="DRY_RUN")
    outcome = ReevaluationOutcome.objects.get(job__ref=job_ref, appointment_ref=world.confirmed.ref)
    assert (outcome.outcome, outcome.applied, outcome.proposal) == (Outcome.CONFIRMED_CHANGE_PROPOSED, False, None)
    assert not AppointmentProposal.objects.exists() and not CapacityHold.objects.exists()


def test_no_fitting_time_asks_staff_and_changes_nothing(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED")
    world.confirmed = world.book("CONFIRMED", 14)
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": "pr_nobody"})
    run_round()
    outcome = ReevaluationOutcome.objects.get(appointment_ref=world.confirmed.ref)
    assert outcome.outcome == Outcome.CONFIRMED_NEEDS_STAFF and outcome.job.needs_staff
    assert not AppointmentProposal.objects.exists()


def test_an_expired_proposal_changes_nothing_and_releases_its_holds(world, crm):
    with time_machine.travel(DAY_BEFORE, tick=True):
        propose(world, crm)
        before = confirmed_row(world.confirmed)
        proposal = AppointmentProposal.objects.get()
        option = proposal.options.exclude(hold=None).first()
        proposal_answer(proposal_ref=proposal.ref, choice="ACCEPT", option_ref=option.ref,
                        digest=_digest(proposal), language="en")
    with time_machine.travel(proposal.expires_at + timedelta(seconds=1), tick=False):
        assert proposals_expire() == 1
        assert proposals_expire() == 0  # safe to repeat
        proposal.refresh_from_db()
        assert proposal.state == ProposalState.EXPIRED and proposal.end_code == "EXPIRED"
        holds = CapacityHold.objects.filter(purpose="REEVALUATION_PROPOSAL")
        assert holds.exists() and set(holds.values_list("status", flat=True)) == {HoldStatus.RELEASED}
        assert not CapacityAllocation.objects.filter(hold__in=holds, active=True).exists()
        assert confirmed_row(world.confirmed) == before
        assert Client().get(path_of(proposal)).status_code == 410
        staff = f.user_with_role(world.clinic, Role.STAFF, username="desk2")
        with pytest.raises(Conflict) as refused:
            proposal_confirm(clinic=world.clinic, proposal_ref=proposal.ref, actor=staff, reason="too late now")
        assert refused.value.code == "PROPOSAL_NOT_CONFIRMABLE"


def test_keep_and_operator_rejection_release_holds_and_change_nothing(world, crm, clinic):
    with time_machine.travel(DAY_BEFORE, tick=True):
        propose(world, crm)
        before = confirmed_row(world.confirmed)
        proposal = AppointmentProposal.objects.get()
        client = Client(enforce_csrf_checks=True)
        kept = page_post(client, path_of(proposal), "KEEP")
        assert kept.status_code == 200 and 'data-state="KEPT"' in kept.content.decode()
        proposal.refresh_from_db()
        assert proposal.state == ProposalState.KEPT
        assert set(CapacityHold.objects.values_list("status", flat=True)) == {HoldStatus.RELEASED}
        [consent] = proposal.consents.all()
        assert consent.choice == "KEEP" and consent.option is None
        assert confirmed_row(world.confirmed) == before
        with pytest.raises(TypeError):
            consent.save()  # append-only evidence
        with pytest.raises(TypeError):
            ProposalConsent.objects.filter(pk=consent.pk).update(choice="ACCEPT")


def test_call_request_then_operator_rejects(world, crm):
    with time_machine.travel(DAY_BEFORE, tick=True):
        propose(world, crm)
        proposal = AppointmentProposal.objects.get()
        called = page_post(Client(enforce_csrf_checks=True), path_of(proposal), "CALL")
        assert 'data-state="CALL_REQUESTED"' in called.content.decode()
        staff = f.user_with_role(world.clinic, Role.STAFF, username="desk3")
        url = f"/api/v1/clinics/{world.clinic.ref}/reevaluation/proposals/{proposal.ref}/reject"
        response = token_client(staff).post(url, {"reason": "called: keeps the visit"}, format="json",
                                            HTTP_IDEMPOTENCY_KEY="r1")
        assert response.status_code == 200 and response.json()["state"] == "REJECTED"
        assert set(CapacityHold.objects.values_list("status", flat=True)) == {HoldStatus.RELEASED}
        assert AuditEntry.objects.filter(action="reevaluation.proposal_reject", actor=staff).count() == 1
        assert world.confirmed.status == Appointment.objects.get(pk=world.confirmed.pk).status


def test_bad_input_is_a_typed_error_and_foreign_refs_are_404(world, crm, other_tenant_clinic):
    with time_machine.travel(DAY_BEFORE, tick=True):
        propose(world, crm)
        proposal = AppointmentProposal.objects.get()
        staff = f.user_with_role(world.clinic, Role.STAFF, username="desk4")
        base = f"/api/v1/clinics/{world.clinic.ref}/reevaluation/proposals"
        client = token_client(staff)
        no_reason = client.post(f"{base}/{proposal.ref}/confirm", {}, format="json", HTTP_IDEMPOTENCY_KEY="b1")
        assert no_reason.status_code == 400 and no_reason.json()["code"] == "VALIDATION_ERROR"
        open_one = client.post(f"{base}/{proposal.ref}/confirm", {"reason": "not accepted yet"}, format="json",
                               HTTP_IDEMPOTENCY_KEY="b2")
        assert open_one.status_code == 409 and open_one.json()["code"] == "PROPOSAL_NOT_CONFIRMABLE"
        assert client.get(f"{base}/rpp_missing").status_code == 404
        assert client.get(f"{base}?state=NOPE").status_code == 400
        listed = client.get(base).json()["items"]
        assert [row["proposal"] for row in listed] == [proposal.ref]
        # Another clinic's staff: the proposal is a 404 there, like a missing one.
        outsider = f.user_with_role(other_tenant_clinic, Role.ADMIN, username="far-away")
        foreign = f"/api/v1/clinics/{other_tenant_clinic.ref}/reevaluation/proposals/{proposal.ref}"
        assert token_client(outsider).get(foreign).status_code == 404
        assert token_client(outsider).post(f"{foreign}/confirm", {"reason": "not mine at all"}, format="json",
                                           HTTP_IDEMPOTENCY_KEY="b3").status_code == 404
        assert token_client(outsider).get(f"{base}/{proposal.ref}").status_code == 404
        # The page: a forged token is a plain 404; an unknown option 400; a stale page 409; nothing recorded.
        page = Client(enforce_csrf_checks=True)
        assert page.get("/claim/rp-forged:token/").status_code == 404
        path = path_of(proposal)
        assert page_post(page, path, "ACCEPT", "rpo_other").status_code == 400
        assert page_post(page, path, "ACCEPT", proposal.options.first().ref, digest="0" * 64).status_code == 409
        assert page_post(page, path, "MAYBE").status_code == 400
        assert not ProposalConsent.objects.exists()
        proposal.refresh_from_db()
        assert proposal.state == ProposalState.OPEN


def test_a_superseded_proposal_is_held_for_the_patient_who_accepts_it(world, crm):
    with time_machine.travel(DAY_BEFORE, tick=True):
        rf.enable(world.clinic, "APPLY_PROPOSED")
        proposed = world.book("PROPOSED", 9)
        post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
        run_round()
        outcome = ReevaluationOutcome.objects.get(appointment_ref=proposed.ref)
        proposal = outcome.proposal
        assert outcome.outcome == Outcome.PROPOSAL_SUPERSEDED and proposal.appointment_ref == outcome.replacement_ref
        assert not proposal.needs_operator
        [option] = proposal.options.all()
        assert option.hold.status == HoldStatus.ACTIVE and option.starts_at == seoul(5, 9)
        proposal = proposal_answer(proposal_ref=proposal.ref, choice="ACCEPT", option_ref=option.ref,
                                   digest=_digest(proposal), language="en")
        assert proposal.state == ProposalState.APPLIED  # no operator for a proposal: the patient's choice holds it
        new = Appointment.objects.get(ref=proposal.result_appointment_ref)
        assert new.status == AppointmentStatus.HELD and new.practitioner == world.dr_b
        assert CapacityAllocation.objects.get(appointment=new, active=True).hold_id == option.hold_id
        replaced = Appointment.objects.get(ref=outcome.replacement_ref)
        assert replaced.status == AppointmentStatus.CANCELLED
        # The patient's own choice on the proposal page moved it: the cancellation says so.
        assert (replaced.cancel_reason_code, replaced.cancelled_by) == ("RESCHEDULED", f"patient:{world.patient.ref}")


def _digest(proposal) -> str:
    from reevaluation.proposals.services import proposal_shown, shown_digest

    return shown_digest(proposal_shown(proposal))


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_two_confirmations_and_a_booking_of_the_same_slot_race(crm):
    """The accepted time (14:00 with Dr B, unheld: it overlaps the patient's own visit) is taken by exactly one
    of: the operator's confirmation (twice, concurrently) and another patient's booking. The old visit is
    released only if the new one is taken, in the same transaction."""
    clinic = f.ClinicFactory(timezone="Asia/Seoul")
    world = ReevaluationWorld(clinic)
    propose(world, crm)
    proposal = AppointmentProposal.objects.get()
    option = proposal.options.get(hold_note="OVERLAPS_CURRENT")
    proposal_answer(proposal_ref=proposal.ref, choice="ACCEPT", option_ref=option.ref, digest=_digest(proposal),
                    language="en")
    staff = f.user_with_role(clinic, Role.STAFF, username="racer")

    def work(i):
        if i < 2:
            return proposal_confirm(clinic=clinic, proposal_ref=proposal.ref, actor=staff, reason=f"confirm {i}!")
        return appointment_book(clinic=clinic, patient=world.other_patient, practitioner=world.dr_b,
                                treatment=world.treatment, starts_at=seoul(5, 14), status="CONFIRMED")

    results = race(work, 3)
    confirms, booking = results[:2], results[2]
    won = [r for r in confirms if isinstance(r, AppointmentProposal)]
    assert len(won) <= 1
    assert all(isinstance(r, (AppointmentProposal, Conflict)) for r in confirms), results
    dr_b_at_14 = CapacityAllocation.objects.filter(
        practitioner=world.dr_b, active=True, kind="APPOINTMENT",
        appointment__starts_at=seoul(5, 14)).count()
    assert dr_b_at_14 == 1  # never double-booked
    old = Appointment.objects.get(pk=world.confirmed.pk)
    proposal.refresh_from_db()
    if won:
        assert isinstance(booking, SlotOccupied)
        assert proposal.state == ProposalState.APPLIED and old.status == AppointmentStatus.CANCELLED
        assert not CapacityAllocation.objects.filter(appointment=old, active=True).exists()
        assert Appointment.objects.get(ref=proposal.result_appointment_ref).status == AppointmentStatus.CONFIRMED
        loser = next(r for r in confirms if isinstance(r, Conflict))
        assert loser.code in ("PROPOSAL_ALREADY_APPLIED", "SLOT_OCCUPIED")
    else:
        assert isinstance(booking, Appointment)
        assert all(r.code == "SLOT_OCCUPIED" for r in confirms)
        # Nothing changed for the patient: the old visit stands with its allocation; the proposal waits.
        assert proposal.state == ProposalState.ACCEPTED and old.status == AppointmentStatus.CONFIRMED
        assert CapacityAllocation.objects.filter(appointment=old, active=True).count() == 1


def test_the_console_lists_the_proposal_and_staff_confirm_it_there(world, crm):
    from django.urls import reverse

    from tests.operations.conftest import signed_in

    with time_machine.travel(DAY_BEFORE, tick=True):
        propose(world, crm)
        proposal = AppointmentProposal.objects.get()
        option = proposal.options.exclude(hold=None).first()
        proposal_answer(proposal_ref=proposal.ref, choice="ACCEPT", option_ref=option.ref,
                        digest=_digest(proposal), language="en")
        staff = f.user_with_role(world.clinic, Role.STAFF, username="console-desk")
        client = signed_in(staff)
        page = client.get(reverse("console:reevaluation", kwargs={"clinic_ref": world.clinic.ref}))
        html = page.content.decode()
        assert page.status_code == 200 and f'data-proposal="{proposal.ref}"' in html
        assert 'data-testid="awaiting-operator"' in html and proposal.assessment_ref in html
        assert_no_pii(html, [world.patient])
        url = reverse("console:reevaluation-proposal-confirm",
                      kwargs={"clinic_ref": world.clinic.ref, "proposal_ref": proposal.ref})
        bad = client.post(url, {"reason": "ok", "idempotency_key": "c0"}, HTTP_HX_REQUEST="true")
        assert 'data-testid="reason-confirm"' in bad.content.decode()  # the form again, with its errors
        proposal.refresh_from_db()
        assert proposal.state == ProposalState.ACCEPTED
        done = client.post(url, {"reason": "patient chose it", "confirm": "on", "idempotency_key": "c1"},
                           HTTP_HX_REQUEST="true")
        assert done.status_code == 200 and 'data-state="APPLIED"' in done.content.decode()
        proposal.refresh_from_db()
        assert proposal.state == ProposalState.APPLIED and proposal.operator == staff
        assert Appointment.objects.get(ref=proposal.result_appointment_ref).status == AppointmentStatus.CONFIRMED


def test_the_proposal_page_speaks_korean_to_a_korean_patient(world, crm):
    world.patient.language = "ko"
    world.patient.save(update_fields=["language"])
    with time_machine.travel(DAY_BEFORE, tick=True):
        propose(world, crm)
        proposal = AppointmentProposal.objects.get()
        response = Client().get(path_of(proposal))
        html = response.content.decode()
        assert response["Content-Language"] == "ko" and '<html lang="ko">' in html
        assert "예약의 새 시간" in html and "이 시간 수락하기" in html and "현재 예약 유지하기" in html
        assert "전화해 주세요" in html and "서울 시간" in html and "Accept this time" not in html
        english = Client().get(path_of(proposal) + "?lang=en").content.decode()
        assert "Keep my current appointment" in english
