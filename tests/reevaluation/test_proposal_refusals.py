"""Issue 43's missing tests for proposals: an answer with an empty digest is refused like any digest that
is not the page's, and the ``proposal_applied`` notice is not sent to a patient without contact consent."""

from __future__ import annotations

import pytest
import time_machine
from django.core import mail
from django.test import Client

from common.errors import Conflict
from common.models import OutboxMessage
from common.outbox import outbox_deliver_due
from reevaluation.proposals.models import AppointmentProposal, ProposalConsent, ProposalState
from reevaluation.proposals.services import proposal_answer, proposal_shown, shown_digest
from scheduling.models import ConsentSource, ConsentState, ContactChannel
from scheduling.services.consent import consent_record
from tests.reevaluation.test_proposals import DAY_BEFORE, page_post, path_of, propose

pytestmark = pytest.mark.django_db


def superseded_proposal(world, crm) -> AppointmentProposal:
    """A PROPOSED visit the CRM's change supersedes: a proposal the patient's answer applies at once."""
    from tests.reevaluation.conftest import post_event, run_round

    world.clinic.settings = {"notification": {"provider": "email"}}
    world.clinic.save(update_fields=["settings"])
    from tests.reevaluation import factories as rf

    rf.enable(world.clinic, "APPLY_PROPOSED")
    world.book("PROPOSED", 9)
    post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
    run_round()
    return AppointmentProposal.objects.get()


@pytest.mark.parametrize("digest", ["", " "])
def test_an_answer_with_an_empty_digest_is_refused_and_records_nothing(world, crm, digest):
    with time_machine.travel(DAY_BEFORE, tick=True):
        propose(world, crm)
        proposal = AppointmentProposal.objects.get()
        option = proposal.options.exclude(hold=None).first()
        with pytest.raises(Conflict) as refused:
            proposal_answer(proposal_ref=proposal.ref, choice="ACCEPT", option_ref=option.ref, digest=digest,
                            language="en")
        assert refused.value.code == "PROPOSAL_CHANGED"
        assert page_post(Client(enforce_csrf_checks=True), path_of(proposal), "KEEP", digest=digest
                         ).status_code == 409
        proposal.refresh_from_db()
        assert proposal.state == ProposalState.OPEN and not ProposalConsent.objects.exists()


def test_the_proposal_applied_notice_is_not_sent_without_consent(world, crm):
    with time_machine.travel(DAY_BEFORE, tick=True):
        proposal = superseded_proposal(world, crm)
        outbox_deliver_due(worker="test")  # the proposal's own notice
        mail.outbox.clear()
        [option] = proposal.options.all()
        proposal = proposal_answer(proposal_ref=proposal.ref, choice="ACCEPT", option_ref=option.ref,
                                   digest=shown_digest(proposal_shown(proposal)), language="en")
        assert proposal.state == ProposalState.APPLIED
        consent_record(patient=proposal.patient, channels=list(ContactChannel.values), state=ConsentState.REVOKED,
                       source=ConsentSource.STAFF, actor_label="test")
        outbox_deliver_due(worker="test")
    message = OutboxMessage.objects.get(topic="reevaluation.proposal_applied", aggregate_ref=proposal.ref)
    assert (message.status, message.last_error_code, message.sent_at) == ("SENT", "CONSENT_REVOKED", None)
    assert mail.outbox == []
