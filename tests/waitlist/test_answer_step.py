"""``answer_step``: the one rule for what a patient's yes or no does, read by the claim page and a text reply
(issue 42: a decision exists once)."""

from __future__ import annotations

import inspect

import pytest

from waitlist.offers import claim_reads, pages
from waitlist.offers.claim_reads import AnswerStep, ClaimOutcome, ClaimState, LateYes, answer_step
from waitlist.texts.services import replies


@pytest.mark.parametrize("state", [ClaimState.OPEN, ClaimState.HELD, ClaimState.BOOKED])
def test_a_yes_claims_an_offer_open_held_or_booked(state):
    assert answer_step(ClaimOutcome(state), yes=True) == AnswerStep.CLAIM


@pytest.mark.parametrize("late", [LateYes.FREE, LateYes.NEXT])
def test_a_yes_to_an_unanswered_offer_whose_time_is_still_free_takes_it_up_late(late):
    assert answer_step(ClaimOutcome(ClaimState.EXPIRED, late_yes=late), yes=True) == AnswerStep.LATE_ACCEPT


@pytest.mark.parametrize("outcome", [
    ClaimOutcome(ClaimState.EXPIRED), ClaimOutcome(ClaimState.EXPIRED, late_yes=LateYes.KEPT),
    ClaimOutcome(ClaimState.DECLINED), ClaimOutcome(ClaimState.WITHDRAWN), ClaimOutcome(ClaimState.RELEASED),
    ClaimOutcome(ClaimState.BOOKING_CANCELLED)])
def test_a_yes_to_an_ended_offer_does_nothing(outcome):
    assert answer_step(outcome, yes=True) == AnswerStep.ENDED


def test_a_no_declines_only_an_open_offer():
    assert answer_step(ClaimOutcome(ClaimState.OPEN), yes=False) == AnswerStep.DECLINE
    assert answer_step(ClaimOutcome(ClaimState.DECLINED), yes=False) == AnswerStep.ALREADY_DECLINED
    for state in (ClaimState.HELD, ClaimState.BOOKED, ClaimState.EXPIRED, ClaimState.WITHDRAWN):
        assert answer_step(ClaimOutcome(state, late_yes=LateYes.FREE), yes=False) == AnswerStep.ENDED


def test_the_claim_page_and_a_text_reply_read_the_rule_instead_of_restating_it():
    for module in (pages, replies):
        source = inspect.getsource(module)
        assert "answer_step(" in source
        assert "LateYes.FREE" not in source and "LateYes.NEXT" not in source, module.__name__
    assert "LateYes.FREE, LateYes.NEXT" in inspect.getsource(claim_reads.answer_step)
