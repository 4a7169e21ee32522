"""Upkeep under a controlled clock (issue 40): the question after N weeks of waiting, yes, no, silence -> paused,
resume by the link or by staff, quiet hours, and the counts in /metrics."""

from __future__ import annotations

from datetime import time, timedelta

import pytest
import time_machine
from django.core import mail
from django.test import Client

from common.outbox import outbox_deliver_due
from tests.conftest import token_client
from tests.waitlist.factories import NOW
from tests.waitlist.joining_helpers import open_joining
from waitlist import services
from waitlist.joining.models import UpkeepAsk, UpkeepOutcome
from waitlist.joining.services import PAUSED_UNTIL_RESUMED
from waitlist.joining.tokens import status_path
from waitlist.joining.upkeep import upkeep_ask_due, upkeep_counts, upkeep_pause_silent
from waitlist.models import EntryStatus

pytestmark = pytest.mark.django_db
WEEK = 7 * 86400


@pytest.fixture
def waiting(world):
    open_joining(world)
    entry = world.waiting(patient=world.patient(email="ha@example.com"))
    return entry


def later(weeks: float):
    return time_machine.travel(NOW.timestamp() + weeks * WEEK, tick=False)


def test_no_question_before_the_clinics_weeks_of_waiting(world, waiting):
    with later(7.9):
        assert upkeep_ask_due() == 0


def test_after_eight_weeks_the_patient_is_asked_by_their_channel_with_the_status_link(world, waiting):
    with later(8.1):
        assert upkeep_ask_due() == 1
        outbox_deliver_due(worker="t")
    assert mail.outbox[-1].to == ["ha@example.com"]
    assert "still need an earlier time" in mail.outbox[-1].body and "/join/status/" in mail.outbox[-1].body


def test_a_patient_is_asked_again_only_after_another_period(world, waiting):
    with later(8.1):
        upkeep_ask_due()
    with later(9):
        assert upkeep_ask_due() == 0


def test_yes_keeps_the_place_and_waiting_since(world, waiting):
    since = waiting.waiting_since
    with later(8.1):
        upkeep_ask_due()
        Client().post(status_path(waiting.patient), {"entry": waiting.ref, "action": "still_needed"})
    waiting.refresh_from_db()
    assert waiting.status == EntryStatus.WAITING and waiting.waiting_since == since
    assert UpkeepAsk.objects.get().outcome == UpkeepOutcome.STILL_NEEDED


def test_yes_refreshes_waiting_since_when_the_clinic_says_so(world, waiting):
    from waitlist.joining.models import JoinSettings

    JoinSettings.objects.filter(clinic=world.clinic).update(upkeep_refreshes_wait=True)
    with later(8.1):
        upkeep_ask_due()
        Client().post(status_path(waiting.patient), {"entry": waiting.ref, "action": "still_needed"})
    waiting.refresh_from_db()
    assert waiting.waiting_since > NOW + timedelta(weeks=8)


def test_no_withdraws_the_entry(world, waiting):
    with later(8.1):
        upkeep_ask_due()
        Client().post(status_path(waiting.patient), {"entry": waiting.ref, "action": "not_needed"})
    waiting.refresh_from_db()
    assert waiting.status == EntryStatus.WITHDRAWN and "upkeep" in waiting.withdraw_reason


def test_silence_for_seven_days_pauses_the_entry_and_it_gets_no_offers(world, waiting):
    from tests.waitlist.loop_helpers import open_vacancy

    with later(8.1):
        upkeep_ask_due()
    with later(9.2):
        assert upkeep_pause_silent() == 1
    waiting.refresh_from_db()
    assert waiting.paused_until == PAUSED_UNTIL_RESUMED
    vacancy = open_vacancy(world)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome != "OFFERED"


def test_a_paused_entry_is_resumed_by_the_patients_yes(world, waiting):
    with later(8.1):
        upkeep_ask_due()
    with later(9.2):
        upkeep_pause_silent()
        page = Client().get(status_path(waiting.patient))
        assert "Do you still need an earlier time?" in page.content.decode()
        Client().post(status_path(waiting.patient), {"entry": waiting.ref, "action": "still_needed"})
    waiting.refresh_from_db()
    assert waiting.paused_until is None


def test_staff_resume_a_paused_entry(world, waiting):
    with later(8.1):
        upkeep_ask_due()
    with later(9.2):
        upkeep_pause_silent()
        answer = token_client(world.staff).post(
            f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/{waiting.ref}/resume", format="json")
    assert answer.status_code == 200, answer.content
    waiting.refresh_from_db()
    assert waiting.paused_until is None


def test_quiet_hours_hold_the_question_back(world, waiting):
    services.policy_publish(clinic=world.clinic, quiet_hours_start=time(21), quiet_hours_end=time(8))
    with time_machine.travel(NOW + timedelta(weeks=8, hours=14), tick=False):  # 23:00 in Seoul
        upkeep_ask_due()
        outbox_deliver_due(worker="t")
    assert mail.outbox == []


def test_the_counts_by_outcome(world, waiting):
    with later(8.1):
        upkeep_ask_due()
    with later(9.2):
        upkeep_pause_silent()
    assert upkeep_counts([world.clinic.pk]) == {world.clinic.pk: {"PAUSED": 1}}
