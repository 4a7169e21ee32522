"""An automatic booking counts once it is seen: its "you are booked" text asks for a reply; a reply, the link or
the calendar file acknowledges it; unacknowledged it is reminded, then released and refilled in time."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client

from common.models import AuditEntry, DeliveryOutcome
from scheduling.models import Appointment, AppointmentStatus
from tests.conftest import seoul
from tests.support.twilio_gateway import twilio_gateway
from tests.waitlist.loop_helpers import deliver, make_offer, open_vacancy
from tests.waitlist.test_standing import booked
from waitlist import services
from waitlist.models import BookingAck, VacancyStatus
from waitlist.offers.tokens import calendar_link
from waitlist.texts.services.acknowledgement import ack_times, acknowledgements_run

PHONE, OTHER = "+821055512345", "+821099998888"
CODE = re.compile(r"YES (\d{4})")
SHORT = re.compile(r"(/c/[A-Za-z0-9_-]+)")


@pytest.fixture
def gateway(settings, world):
    settings.TEXT_INBOUND_RATE = ""
    world.clinic.settings = {"notification": {"provider": "sms"}}
    world.clinic.save(update_fields=["settings"])
    with twilio_gateway(settings) as gw:
        yield gw


def _booked_and_texted(world, gateway):
    patient = world.patient(phone=PHONE)
    vacancy, offer = booked(world, world.waiting(patient))
    assert deliver() == {DeliveryOutcome.SENT: 1}
    body = gateway.to(PHONE)[-1]["Body"]
    assert "we booked you" in body
    return vacancy, offer, body, BookingAck.objects.get(offer=offer)


def test_the_deadlines_follow_the_policy_rule(world, gateway):
    _vacancy, offer, _body, ack = _booked_and_texted(world, gateway)
    assert ack.release_at == offer.release_until - timedelta(minutes=10) and offer.release_until <= seoul(3, 10)
    # The later of 2 h after the booking and 24 h before the slot, but an hour before the release at the latest.
    assert ack.remind_at == min(max(ack.booked_at + timedelta(hours=2), seoul(3, 10) - timedelta(hours=24)),
                                ack.release_at - timedelta(hours=1))
    assert ack.booked_at < ack.remind_at < ack.release_at



@pytest.mark.parametrize(("booked", "starts", "release_until", "remind", "release"), [
    # The slot is far: 24 h before it is later than 2 h after the booking, and before the release.
    (seoul(1, 9), seoul(5, 9), seoul(4, 9), seoul(4, 7, 50), seoul(4, 8, 50)),
    (seoul(1, 9), seoul(5, 9), seoul(5, 8), seoul(4, 9), seoul(5, 8) - timedelta(minutes=10)),
    # The slot is near: 2 h after the booking is the later.
    (seoul(1, 9), seoul(2, 0), seoul(1, 23), seoul(1, 11), seoul(1, 23) - timedelta(minutes=10)),
    # The release comes first: an hour before it, never after it.
    (seoul(1, 9), seoul(1, 14), seoul(1, 11, 30), seoul(1, 10, 20), seoul(1, 11, 20)),
    (seoul(1, 9), seoul(1, 11), seoul(1, 9, 5), seoul(1, 9), seoul(1, 9)),
])
def test_the_rule_at_the_policy_defaults(booked, starts, release_until, remind, release):
    assert ack_times(booked_at=booked, starts_at=starts, release_until=release_until) == (remind, release)


def test_the_clinics_policy_sets_when_the_reminder_goes(world, gateway):
    services.policy_publish(clinic=world.clinic, ack_remind_after_minutes=30, ack_remind_before_slot_hours=72)
    _vacancy, offer, _body, ack = _booked_and_texted(world, gateway)
    assert offer.policy.ack_remind_after_minutes == 30
    assert ack.remind_at == ack.booked_at + timedelta(minutes=30)


def test_an_unacknowledged_automatic_booking_is_reminded_released_and_refilled(world, gateway, frozen_clock,
                                                                            queued_dispatches, on_commit):
    vacancy, offer, _body, ack = _booked_and_texted(world, gateway)
    world.waiting(world.patient(phone=OTHER))
    frozen_clock.move_to(ack.remind_at)
    assert acknowledgements_run() == {"reminded": 1, "released": 0}
    assert deliver() == {DeliveryOutcome.SENT: 1} and len(gateway.to(PHONE)) == 2  # the reminder, by text
    assert acknowledgements_run() == {"reminded": 0, "released": 0}  # once
    frozen_clock.move_to(ack.release_at)
    queued_dispatches.clear()
    with on_commit(execute=True):
        assert acknowledgements_run() == {"reminded": 0, "released": 1}
    assert Appointment.objects.get(source_hold__offer=offer).status == AppointmentStatus.CANCELLED
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.OPEN and queued_dispatches == [vacancy.pk]  # the cascade, queued
    audit = AuditEntry.objects.get(action="text_ack_release")
    assert audit.reason == "UNACKNOWLEDGED" and audit.target_ref == offer.ref
    refill = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)  # the cascade
    assert refill.outcome == "OFFERED"
    margin = timedelta(minutes=services.policy_current(clinic=world.clinic).answer_window_margin_minutes)
    assert refill.offer.expires_at <= vacancy.starts_at - margin  # in time: the next patient can still answer
    deliver()
    code = CODE.search(gateway.to(OTHER)[-1]["Body"]).group(1)
    assert "you are booked" in gateway.reply(OTHER, f"YES {code}").content.decode()
    refilled = Appointment.objects.get(patient__phone=OTHER)
    assert refilled.status == AppointmentStatus.CONFIRMED and refilled.starts_at == seoul(3, 10)


def test_a_reply_acknowledges_and_nothing_is_released(world, gateway, frozen_clock):
    _vacancy, offer, body, ack = _booked_and_texted(world, gateway)
    assert "you are booked" in gateway.reply(PHONE, f"YES {CODE.search(body).group(1)}").content.decode()
    frozen_clock.move_to(ack.release_at)
    assert acknowledgements_run() == {"reminded": 0, "released": 0}
    ack.refresh_from_db()
    assert ack.acknowledged_via == "REPLY"
    assert Appointment.objects.get(source_hold__offer=offer).status == AppointmentStatus.CONFIRMED


def test_opening_the_texts_link_acknowledges(world, gateway):
    _vacancy, _offer, body, ack = _booked_and_texted(world, gateway)
    assert Client().get(SHORT.search(body).group(1)).status_code == 302
    ack.refresh_from_db()
    assert ack.acknowledged_via == "LINK"


def test_fetching_the_calendar_file_acknowledges(world, gateway):
    _vacancy, offer, _body, ack = _booked_and_texted(world, gateway)
    appointment = Appointment.objects.get(source_hold__offer=offer)
    link = calendar_link(appointment)
    assert Client().get(link[link.index("/claim/"):]).status_code == 200
    ack.refresh_from_db()
    assert ack.acknowledged_via == "CALENDAR"


def test_a_booking_the_patient_released_is_closed_not_released_again(world, gateway, frozen_clock):
    _vacancy, offer, _body, ack = _booked_and_texted(world, gateway)
    services.standing_release(clinic=world.clinic, offer_ref=offer.ref, patient=offer.patient)
    frozen_clock.move_to(ack.release_at)
    assert acknowledgements_run() == {"reminded": 0, "released": 0}
    ack.refresh_from_db()
    assert ack.released_at is not None and ack.closed_code != "UNACKNOWLEDGED"
    assert not AuditEntry.objects.filter(action="text_ack_release").exists()


def test_staff_see_an_unacknowledged_automatic_booking_with_its_time_left(world, gateway, frozen_clock):
    from waitlist.figures.queue import ops_action_queue

    _vacancy, offer, body, ack = _booked_and_texted(world, gateway)
    frozen_clock.move_to(ack.release_at - timedelta(minutes=30))
    rows = [r for r in ops_action_queue(clinic=world.clinic)["items"] if r["kind"] == "BOOKING_UNACKNOWLEDGED"]
    assert [(r["offer"], r["seconds_left"]) for r in rows] == [(offer.ref, 1800)]
    gateway.reply(PHONE, f"YES {CODE.search(body).group(1)}")
    assert not [r for r in ops_action_queue(clinic=world.clinic)["items"] if r["kind"] == "BOOKING_UNACKNOWLEDGED"]


def _console_row(world, kind: str) -> str:
    from tests.operations.conftest import signed_in

    page = signed_in(world.staff).get(f"/console/c/{world.clinic.ref}/waitlist/").content.decode()
    rows = re.findall(r'<tr data-queue-ref="[^"]*" data-kind="' + kind + r'".*?</tr>', page, re.S)
    assert len(rows) == 1, kind
    return re.sub(r"\s+", " ", rows[0])


def test_the_console_queue_shows_when_an_unacknowledged_booking_is_released_and_the_time_left(world, gateway,
                                                                                             frozen_clock):
    _vacancy, offer, _body, ack = _booked_and_texted(world, gateway)
    frozen_clock.move_to(ack.release_at - timedelta(minutes=90))
    row = _console_row(world, "BOOKING_UNACKNOWLEDGED")
    released = ack.release_at.astimezone(seoul(1, 0).tzinfo)
    assert offer.ref in row and 'data-testid="ack-time-left"' in row
    assert f"released <time datetime=\"{released.isoformat()}\">" in row and f"{released:%H:%M}" in row
    assert re.search(r"data-countdown>1h 30m</time> left", row)


def test_staff_see_a_patient_whose_texts_keep_failing(world, gateway):
    from waitlist.figures.queue import ops_action_queue

    def failing():
        return [r for r in ops_action_queue(clinic=world.clinic)["items"] if r["kind"] == "TEXTS_FAILING"]

    patient = world.patient(phone=PHONE, consent=["SMS"])
    world.waiting(patient, treatment=world.other_treatment)
    make_offer(world, patient)
    deliver()
    gateway.receipt(gateway.to(PHONE)[0]["sid"], "undelivered", "30005")
    assert failing() == []  # one failure is not a pattern
    vacancy = open_vacancy(world, seoul(4, 10), treatment=world.other_treatment)
    services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    deliver()
    gateway.receipt(gateway.to(PHONE)[1]["sid"], "failed", "30003")
    rows = failing()
    assert [(r["patient"], r["failures"], r["reason_code"]) for r in rows] == [(patient.ref, 2, "TWILIO_30003")]
    row = _console_row(world, "TEXTS_FAILING")  # the console's queue: who, how many, the last error, what to do
    assert patient.ref in row and "2 texts failed or undelivered" in row and "TWILIO_30003" in row
    assert "check the phone number on file" in row


def test_after_the_reminder_a_bare_yes_acknowledges(world, gateway, frozen_clock):
    _vacancy, offer, _body, ack = _booked_and_texted(world, gateway)
    frozen_clock.move_to(ack.remind_at)
    assert acknowledgements_run()["reminded"] == 1 and deliver() == {DeliveryOutcome.SENT: 1}
    assert len(gateway.to(PHONE)) == 2  # two texts, two codes, one booking: a bare YES is not ambiguous
    assert "you are booked" in gateway.reply(PHONE, "yes").content.decode()
    ack.refresh_from_db()
    assert ack.acknowledged_via == "REPLY"
    frozen_clock.move_to(ack.release_at)
    assert acknowledgements_run() == {"reminded": 0, "released": 0}
    assert Appointment.objects.get(source_hold__offer=offer).status == AppointmentStatus.CONFIRMED


def test_no_to_an_automatic_booking_gives_it_back_and_the_slot_to_the_cascade(world, gateway, frozen_clock,
                                                                              queued_dispatches, on_commit):
    from waitlist.figures.queue import ops_action_queue

    vacancy, offer, body, ack = _booked_and_texted(world, gateway)
    queued_dispatches.clear()
    with on_commit(execute=True):
        answer = gateway.reply(PHONE, f"NO {CODE.search(body).group(1)}").content.decode()
    assert "you stay on the waiting list" in answer
    offer.refresh_from_db()
    vacancy.refresh_from_db()
    assert offer.status == "WITHDRAWN" and offer.reason_code == "STANDING_RELEASED"
    assert vacancy.status == VacancyStatus.OPEN and queued_dispatches == [vacancy.pk]
    assert Appointment.objects.get(source_hold__offer=offer).status == AppointmentStatus.CANCELLED
    assert AuditEntry.objects.get(action="text_reply").result["outcome"] == "DECLINED"
    # Given back, it is nobody's call any more, and no "you are booked" reminder follows.
    assert not [r for r in ops_action_queue(clinic=world.clinic)["items"] if r["kind"] == "BOOKING_UNACKNOWLEDGED"]
    frozen_clock.move_to(ack.remind_at)
    assert acknowledgements_run() == {"reminded": 0, "released": 0}
    ack.refresh_from_db()
    assert ack.closed_code == "NOT_BOOKED" and not AuditEntry.objects.filter(action="text_ack_release").exists()


def test_no_past_the_release_deadline_keeps_the_booking_and_says_to_call(world, gateway, frozen_clock):
    world.clinic.settings = {**world.clinic.settings, "contact": {"phone": "+82 2-555-0100"}}
    world.clinic.save(update_fields=["settings"])
    _vacancy, offer, body, ack = _booked_and_texted(world, gateway)
    frozen_clock.move_to(offer.release_until + timedelta(minutes=1))
    answer = gateway.reply(PHONE, f"NO {CODE.search(body).group(1)}").content.decode()
    assert "can no longer be released" in answer and "+82 2-555-0100" in answer
    ack.refresh_from_db()
    assert ack.acknowledged_via == "REPLY"  # seen: it stands, and the job leaves it
    assert Appointment.objects.get(source_hold__offer=offer).status == AppointmentStatus.CONFIRMED


def test_a_booking_the_patient_gave_back_on_the_claim_page_leaves_the_queue_and_gets_no_reminder(world, gateway,
                                                                                                 frozen_clock):
    from waitlist.figures.queue import ops_action_queue

    _vacancy, offer, _body, ack = _booked_and_texted(world, gateway)
    services.standing_release(clinic=world.clinic, offer_ref=offer.ref, patient=offer.patient)
    assert not [r for r in ops_action_queue(clinic=world.clinic)["items"] if r["kind"] == "BOOKING_UNACKNOWLEDGED"]
    frozen_clock.move_to(ack.remind_at)
    assert acknowledgements_run() == {"reminded": 0, "released": 0}
    assert deliver() == {} and len(gateway.to(PHONE)) == 1
