"""An offer's terms (``waitlist.rules.terms.offer_terms``): one pure function, no database, every branch here on
plain values (an unsaved policy, a vacancy's start and zone, the facts promotion reads with the entry's lock)."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

from tests.conftest import seoul
from waitlist.models import DecisionGate, DecisionStatus, WaitlistPolicy
from waitlist.reliability.feed import Decision
from waitlist.rules import terms
from waitlist.rules.eligibility import RULES

NOW = seoul(2, 10)
VACANCY = SimpleNamespace(starts_at=seoul(3, 10), clinic=SimpleNamespace(timezone="Asia/Seoul"))
FRESH = Decision("dec_fresh", DecisionStatus.FRESH, 3, seoul(9, 0))
NOT_USED = Decision("", DecisionStatus.NOT_USED, 0, None)


def policy(**fields) -> WaitlistPolicy:
    values = {"hold_minutes": 20, "min_lead_minutes": 60, "quiet_hours_start": None, "quiet_hours_end": None,
              "contact_cap_per_day": None, "decision_gate": DecisionGate.REQUIRED} | fields
    return WaitlistPolicy(**values)


def facts(**fields) -> terms.EntryFacts:
    values = {"checks": [True] * len(RULES), "sent": [], "unanswered": 0, "standing_min_notice": None,
              "patient_ref": "pat_1"} | fields
    return terms.EntryFacts(**values)


def decide(p=None, f=None, decision=FRESH, **kwargs):
    return terms.offer_terms(policy=p or policy(), vacancy=VACANCY, facts=f or facts(), decision=decision, now=NOW,
                             **kwargs)


def test_an_eligible_reachable_candidate_is_offered_with_the_policys_window_and_its_decision():
    t = decide()
    assert isinstance(t, terms.OfferTerms) and t.outcome == terms.OFFER and t.notice and t.release_until is None
    rule = terms.window_rule(policy(), "Asia/Seoul")
    assert t.expires_at == terms.answer_deadline(rule, start=NOW, slot_starts_at=VACANCY.starts_at)
    assert t.decision == {"decision_ref": "dec_fresh", "decision_status": DecisionStatus.FRESH,
                          "decision_priority_rank": 3, "decision_expires_at": FRESH.expires_at,
                          "staff_reviewed": False}


def test_a_decision_no_longer_fresh_restarts_unless_staff_reviewed_it():
    stale = Decision("dec_old", DecisionStatus.FRESH, 3, NOW)  # expiry inclusive: stale at NOW
    assert decide(decision=stale) == terms.NoOffer(terms.RESTART)
    assert decide(decision=None) == terms.NoOffer(terms.RESTART)
    reviewed = decide(decision=stale, staff_reviewed=True)
    assert isinstance(reviewed, terms.OfferTerms)
    assert reviewed.decision["decision_status"] == DecisionStatus.STALE and reviewed.decision["staff_reviewed"]
    nothing = decide(decision=None, staff_reviewed=True)
    assert isinstance(nothing, terms.OfferTerms)
    assert nothing.decision["decision_status"] == DecisionStatus.UNAVAILABLE
    assert nothing.decision["decision_expires_at"] == nothing.expires_at


def test_without_the_gate_the_offer_records_not_used():
    t = decide(policy(decision_gate=DecisionGate.NOT_USED), decision=NOT_USED)
    assert isinstance(t, terms.OfferTerms) and t.decision["decision_status"] == DecisionStatus.NOT_USED


def test_the_first_failed_rule_makes_the_candidate_ineligible_and_a_late_accept_waives_the_list_s_own_limits():
    codes = [rule.code for rule in RULES]
    weekly = [code != "WEEKLY_CAP" for code in codes]
    assert decide(f=facts(checks=weekly)) == terms.NoOffer(terms.INELIGIBLE, reason="WEEKLY_CAP")
    late = decide(f=facts(checks=weekly), late=True)
    assert isinstance(late, terms.OfferTerms) and late.outcome == terms.ANSWERED and not late.notice
    window = [code != "WINDOW" for code in codes]
    assert decide(f=facts(checks=window), late=True) == terms.NoOffer(terms.INELIGIBLE, reason="WINDOW")


def test_a_standing_acceptance_books_at_once_when_its_notice_is_met_and_the_clinic_allows_it():
    booked = decide(f=facts(standing_min_notice=60, unanswered=5))
    assert isinstance(booked, terms.OfferTerms) and booked.outcome == terms.BOOK and not booked.notice
    assert booked.release_until == terms.release_deadline(policy(), booked_at=NOW, starts_at=VACANCY.starts_at)
    too_soon = decide(f=facts(standing_min_notice=25 * 60))  # the slot is 24 hours away
    assert isinstance(too_soon, terms.OfferTerms) and too_soon.outcome == terms.OFFER
    off = decide(policy(standing_acceptance=False), f=facts(standing_min_notice=60))
    assert isinstance(off, terms.OfferTerms) and off.outcome == terms.OFFER


def test_a_patient_at_the_contact_cap_is_unreachable_unless_staff_chose_them_or_their_yes_is_given():
    capped = policy(contact_cap_per_day=2)
    sent = [NOW - timedelta(hours=3), NOW - timedelta(hours=1)]
    t = decide(capped, facts(sent=sent))
    assert isinstance(t, terms.NoOffer) and t.outcome == terms.UNREACHABLE
    assert t.unreachable == terms.Unreachable("CONTACT_CAP", sent[0] + timedelta(days=1))
    assert isinstance(decide(capped, facts(sent=sent), staff_reviewed=True), terms.OfferTerms)
    assert decide(capped, facts(sent=sent, standing_min_notice=0)).outcome == terms.BOOK
    assert decide(capped, facts(sent=sent), late=True).outcome == terms.ANSWERED
    assert decide(capped, facts(sent=sent[1:])).outcome == terms.OFFER


def test_a_patient_whose_last_offers_went_unanswered_gets_the_short_window_unless_answering_now():
    short = policy(answer_window_unanswered_after=2, answer_window_unanswered_minutes=30)
    asked = decide(short, facts(unanswered=2))
    assert isinstance(asked, terms.OfferTerms) and asked.expires_at == NOW + timedelta(minutes=30)
    whole = decide(short, facts(unanswered=1))
    assert isinstance(whole, terms.OfferTerms) and whole.expires_at > NOW + timedelta(minutes=30)
    late = decide(short, facts(unanswered=2), late=True)
    assert isinstance(late, terms.OfferTerms) and late.expires_at == whole.expires_at
    assert terms.unanswered_limit(short) == 2 and terms.unanswered_limit(policy()) == 0


def test_the_terms_carry_the_digest_of_the_policy_they_were_decided_under():
    before, after = policy(), policy(hold_minutes=45)
    assert decide(p=before).policy_digest == before.digest()
    assert decide(p=after).policy_digest == after.digest() != before.digest()
