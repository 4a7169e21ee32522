"""The patient's proposal page (issue 44 §6): names in the patient's language, the practitioner of every time
(the change the CRM asked for was one), and no offer of the time the patient already has as a new choice (the
seed: keeping the current appointment is its own answer; a change needs consent and the operator)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.test import Client

from reevaluation.proposals.models import AppointmentProposal, ProposalOption
from reevaluation.proposals.services import proposal_answer, proposal_shown
from reevaluation.proposals.tokens import proposal_link
from scheduling.services import display_name_set
from tests.conftest import seoul
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event, run_round

pytestmark = pytest.mark.django_db

LINK = re.compile(r"https?://[^/\s]+(/claim/rp-[^/\s]+/)")
DAY_BEFORE = seoul(4, 9)


def proposed(world, crm):
    """A CONFIRMED 14:00 visit with Dr A; the CRM now requires Dr B: a proposal of 13:30, 14:00 and 14:30."""
    rf.enable(world.clinic, "APPLY_PROPOSED")
    world.confirmed = world.book("CONFIRMED", 14)
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    assert run_round() == ["COMPLETED"]
    return AppointmentProposal.objects.get()


def page(proposal, lang="") -> str:
    path = LINK.search(proposal_link(proposal)).group(1) + (f"?lang={lang}" if lang else "")
    response = Client().get(path)
    assert response.status_code == 200
    return response.content.decode()


def korean_names(world):
    for kind, ref, name in (("clinic", world.clinic.ref, "강남 클리닉"), ("treatment", world.treatment.ref, "물리치료"),
                            ("practitioner", world.dr_a.ref, "김지훈 원장"),
                            ("practitioner", world.dr_b.ref, "서지원 원장")):
        display_name_set(clinic=world.clinic, kind=kind, ref=ref, language="ko", name=name)


@time_machine.travel(DAY_BEFORE, tick=True)
def test_the_korean_page_shows_the_korean_names_of_clinic_treatment_and_practitioners(world, crm):
    korean_names(world)
    world.patient.language = "ko"
    world.patient.save(update_fields=["language"])
    html = page(proposed(world, crm))
    assert "강남 클리닉" in html and "물리치료" in html and "서지원 원장" in html
    assert world.clinic.name not in html and world.treatment.name not in html and world.dr_b.name not in html


@time_machine.travel(DAY_BEFORE, tick=True)
def test_the_page_names_the_practitioner_of_the_current_appointment_and_of_every_new_time(world, crm):
    html = page(proposed(world, crm), "en")
    current = html.split('data-testid="current-time"', 1)[1].split("</dd>", 1)[0]
    assert world.dr_a.name in current
    options = re.findall(r'<label class="option".*?</label>', html, re.S)
    assert len(options) == 3 and all(world.dr_b.name in o for o in options)


@time_machine.travel(DAY_BEFORE, tick=True)
def test_a_new_time_at_the_current_hour_says_so_and_what_changes(world, crm):
    html = page(proposed(world, crm), "en")
    options = re.findall(r'<label class="option".*?</label>', html, re.S)
    same = [o for o in options if "Same time as now" in o]
    assert len(same) == 1 and "2 p.m." in same[0] and world.dr_b.name in same[0]


@time_machine.travel(DAY_BEFORE, tick=True)
def test_the_time_the_patient_already_has_is_never_offered_as_a_new_choice(world, crm):
    proposal = proposed(world, crm)
    current = world.confirmed
    ProposalOption.objects.create(
        clinic=world.clinic, proposal=proposal, position=9, practitioner=current.practitioner,
        treatment=current.treatment, resource=current.resource, starts_at=current.starts_at,
        ends_at=current.starts_at + timedelta(minutes=30))
    unchanged = ProposalOption.objects.get(proposal=proposal, position=9)
    html = page(proposal, "en")
    assert unchanged.ref not in html and len(re.findall(r'<label class="option"', html)) == 3
    shown = proposal_shown(proposal)
    assert unchanged.ref not in [o["option"] for o in shown["options"]]
    from common.errors import ValidationFailed
    from reevaluation.proposals.services import shown_digest

    with pytest.raises(ValidationFailed):
        proposal_answer(proposal_ref=proposal.ref, choice="ACCEPT", option_ref=unchanged.ref,
                        digest=shown_digest(shown), language="en")


@time_machine.travel(DAY_BEFORE, tick=True)
def test_a_proposed_time_offered_again_is_labelled_as_the_current_time(world, crm):
    rf.enable(world.clinic, "APPLY_PROPOSED")
    world.book("PROPOSED", 9)
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    run_round()
    proposal = AppointmentProposal.objects.get()
    assert not proposal.needs_operator
    html = page(proposal, "en")
    (option,) = re.findall(r'<label class="option".*?</label>', html, re.S)
    assert "This is your current time: accept it to have it held for you." in option
    assert world.dr_b.name in option


@time_machine.travel(DAY_BEFORE, tick=True)
def test_the_korean_proposal_notice_names_the_clinic_and_treatment_in_korean(world, crm):
    from django.core import mail

    from common.outbox import outbox_deliver_due

    world.clinic.settings = {"notification": {"provider": "email"}}
    world.clinic.save(update_fields=["settings"])
    korean_names(world)
    world.patient.language = "ko"
    world.patient.save(update_fields=["language"])
    proposed(world, crm)
    assert outbox_deliver_due(worker="test") == {"SENT": 1}
    [sent] = mail.outbox
    assert "강남 클리닉" in sent.subject and "물리치료" in sent.body
    assert world.clinic.name not in sent.subject + sent.body and world.treatment.name not in sent.body
