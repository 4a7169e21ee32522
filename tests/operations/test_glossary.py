"""The console's one glossary (operations/codes.toml): every code a person sees has English and Korean words,
the tag shows them in the active language and keeps the code beside them and in the tooltip."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import translation

from common.models import DeliveryOutcome, OutboxStatus
from interop.models import SubscriptionStatus
from operations.labels import GLOSSARY, code_help, code_label
from operations.templatetags.console import code
from reevaluation.models import (
    DrainCause,
    DrainState,
    FailureClass,
    InboxStatus,
    JobState,
    MutationMode,
    Outcome,
    PriorityClass,
    QuarantineCategory,
    QuarantineReason,
)
from reevaluation.proposals.models import ProposalChoice, ProposalState, ProposalTrigger
from scheduling.models import AppointmentStatus, CancelReason, HoldStatus
from tests.operations.test_reevaluation_page import failed_jobs, page_url
from tests.operations.waitlist_helpers import bulk_reviews
from tests.worlds import ReevaluationWorld
from waitlist.dispatch.loop import JOB_EXPIRE, JOB_RECONCILE
from waitlist.figures.queue import SOURCES
from waitlist.models import (
    AnswerWindow,
    Confirmation,
    DecisionGate,
    DecisionStatus,
    DeclineReason,
    EntryStatus,
    NonFreshAction,
    OfferStatus,
    SuppressionScope,
    VacancyStatus,
)
from waitlist.standing.models import StandingAcceptanceState
from waitlist.texts.models import TextStatus

#: The choices whose values the console prints (states, reasons, classes, modes, statuses).
SHOWN_ENUMS = (
    EntryStatus, OfferStatus, DeclineReason, VacancyStatus, DecisionStatus, NonFreshAction, DecisionGate,
    Confirmation, AnswerWindow, SuppressionScope, AppointmentStatus, CancelReason, HoldStatus, MutationMode,
    DrainState, DrainCause, FailureClass, JobState, PriorityClass, Outcome, InboxStatus, QuarantineReason,
    QuarantineCategory, ProposalState, ProposalChoice, ProposalTrigger, OutboxStatus, DeliveryOutcome,
    SubscriptionStatus, StandingAcceptanceState, TextStatus,
)
#: Readiness's warnings, the beat jobs' names, the Action queue's kinds and a vacancy's close reasons.
SHOWN_CODES = ("DECISION_FEED_SILENT", "MISSING", "SLOT_TAKEN", "STAFF_CLOSED", "STARTED",
               f"JOB_{JOB_EXPIRE}".upper(), f"JOB_{JOB_RECONCILE}".upper(), *SOURCES)


def shown_codes() -> list[str]:
    return sorted({str(v) for enum in SHOWN_ENUMS for v in enum.values} | set(SHOWN_CODES))


@pytest.mark.parametrize("value", shown_codes())
def test_every_shown_code_has_english_and_korean_words(value):
    entry = GLOSSARY.get(value)
    assert entry is not None, f"{value} has no glossary entry in operations/codes.toml"
    for key in ("label", "help", "label_ko", "help_ko"):
        assert entry.get(key, "").strip(), f"{value} has no {key}"
    assert re.search("[가-힣]", entry["label_ko"]), f"{value}'s label_ko is not Korean"


def test_words_follow_the_active_language():
    with translation.override("ko"):
        assert code_label("APPLY_PROPOSED_AND_HELD") == "제안·잡은 예약 변경"
        assert code_help("DECISION_FEED_SILENT").startswith("판정이 필수인데")
    with translation.override("en"):
        assert code_label("APPLY_PROPOSED_AND_HELD") == "Change proposed and held visits"


def test_unknown_code_shows_as_it_is_in_either_language():
    with translation.override("ko"):
        assert code_label("SOMETHING_NEW") == "SOMETHING_NEW" and code_help("SOMETHING_NEW") == ""


def test_tag_keeps_the_code_and_puts_the_explanation_in_the_tooltip_in_korean():
    with translation.override("ko"):
        context = code("TRANSIENT")
    assert context == {"value": "TRANSIENT", "label": "일시적 오류", "help": GLOSSARY["TRANSIENT"]["help_ko"]}


def test_readiness_and_queue_name_a_missing_decision_with_the_same_words():
    """Readiness counts MISSING into UNAVAILABLE, the queue's candidate shows UNAVAILABLE: one entry, one phrase."""
    for language in ("en", "ko"):
        with translation.override(language):
            label = code_label("UNAVAILABLE")
            assert label == code_label("DECISION_UNAVAILABLE")
            assert f"{label}" in code_help("MISSING") and "UNAVAILABLE" in code_help("MISSING")


@pytest.mark.django_db
def test_reevaluation_page_in_korean_shows_failure_classes_in_words_with_codes_in_tooltips(staff_web, clinic):
    world = ReevaluationWorld(clinic)
    failed_jobs(world, 1, start=1, code="ASSESSMENT_TIMEOUT")
    failed_jobs(world, 1, start=2, code="SOMETHING_OUTSIDE_THE_CONTRACT")
    html = staff_web.get(page_url(clinic), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    counts = re.search(r'data-testid="failed-by-class">(.*?)</small>', html, re.S).group(1)
    transient = GLOSSARY["TRANSIENT"]
    assert f'title="{transient["help_ko"]}" data-code="TRANSIENT">{transient["label_ko"]} <code' in counts
    assert f'data-code="CONTRACT">{GLOSSARY["CONTRACT"]["label_ko"]} <code' in counts
    assert f'data-code="DISABLED">{GLOSSARY["mode.DISABLED"]["label_ko"]} <code' in html  # the mutation mode
    assert "Temporary" not in counts


@pytest.mark.django_db
def test_reevaluation_page_in_english_keeps_english_words(staff_web, clinic):
    world = ReevaluationWorld(clinic)
    failed_jobs(world, 1, code="ASSESSMENT_TIMEOUT")
    html = staff_web.get(page_url(clinic), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    counts = re.search(r'data-testid="failed-by-class">(.*?)</small>', html, re.S).group(1)
    assert 'data-code="TRANSIENT">Temporary <code' in counts


@pytest.mark.django_db
@pytest.mark.usefixtures("frozen_clock", "no_broker")
def test_vacancy_list_in_korean_shows_the_state_in_korean_with_the_code_kept(staff_web, world):
    bulk_reviews(world, 1)
    url = reverse("console:waitlist-list", kwargs={"clinic_ref": world.clinic.ref, "kind": "vacancies"})
    html = staff_web.get(url + "?status=REVIEW", HTTP_ACCEPT_LANGUAGE="ko-KR,ko;q=0.9").content.decode()
    review = GLOSSARY["REVIEW"]
    shown = f'title="{review["help_ko"]}" data-code="REVIEW">{review["label_ko"]} <code class="code">REVIEW</code>'
    assert shown in html
