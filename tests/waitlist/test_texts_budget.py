"""One contact budget across channels: the daily cap counts texts and e-mails together; quiet hours hold texts as
they hold e-mails. And the demo's pieces: the console prints a text, the signed curl the README's tour pastes."""

from __future__ import annotations

import re
import shlex
from datetime import time
from io import StringIO

import pytest
from django.core import mail
from django.core.management import call_command
from django.test import Client

from common.models import DeliveryOutcome, OutboxMessage
from scheduling.models import Appointment
from tests.conftest import seoul
from tests.support.twilio_gateway import twilio_gateway
from tests.waitlist.loop_helpers import deliver, make_offer, open_vacancy
from waitlist import services
from waitlist.models import InboundText

PHONE = "+821055512345"


@pytest.fixture
def gateway(settings, world):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.TEXT_INBOUND_RATE = ""
    world.clinic.settings = {"notification": {"provider": "sms"}}
    world.clinic.save(update_fields=["settings"])
    with twilio_gateway(settings) as gw:
        yield gw


def test_a_failed_texts_email_fallback_counts_against_the_same_daily_cap(world, gateway):
    services.policy_publish(clinic=world.clinic, contact_cap_per_day=1)
    patient = world.patient(phone=PHONE)
    offer = make_offer(world, patient)
    assert deliver() == {DeliveryOutcome.SENT: 1}  # the text: the one contact of the day
    gateway.receipt(gateway.to(PHONE)[0]["sid"], "failed", "30003")
    assert deliver() == {DeliveryOutcome.DEFERRED: 1}  # its e-mail fallback waits for the cap
    fallback = OutboxMessage.objects.filter(topic="waitlist.offer_made").order_by("-id").first()
    assert fallback.last_error_code == "CONTACT_CAP" and not mail.outbox and offer.ref in fallback.payload["offer"]


def test_an_email_counts_against_the_cap_a_text_then_waits_for(world, gateway):
    services.policy_publish(clinic=world.clinic, contact_cap_per_day=1)
    patient = world.patient(phone=PHONE)
    world.waiting(patient, treatment=world.other_treatment)
    patient.phone, phone = "", patient.phone
    patient.save(update_fields=["phone"])
    make_offer(world, patient)
    assert deliver() == {DeliveryOutcome.SENT: 1} and len(mail.outbox) == 1  # no phone: by e-mail
    patient.phone = phone
    patient.save(update_fields=["phone"])
    vacancy = open_vacancy(world, seoul(4, 10), treatment=world.other_treatment)
    services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert not gateway.to(PHONE)  # dispatch or delivery held it back: the cap counts the e-mail
    assert deliver() in ({}, {DeliveryOutcome.DEFERRED: 1}) and not gateway.to(PHONE)


def test_quiet_hours_hold_a_text_until_they_end(world, gateway, frozen_clock):
    patient = world.patient(phone=PHONE)
    make_offer(world, patient)
    services.policy_publish(clinic=world.clinic, quiet_hours_start=time(21), quiet_hours_end=time(8))
    frozen_clock.move_to(seoul(1, 22))
    assert deliver() == {DeliveryOutcome.DEFERRED: 1} and not gateway.to(PHONE)
    frozen_clock.move_to(seoul(2, 8))
    assert deliver() == {DeliveryOutcome.SENT: 1} and len(gateway.to(PHONE)) == 1


def test_the_console_prints_a_text_when_console_texts_are_on(world, settings, capsys):
    settings.NOTIFY_CONSOLE_TEXTS = True
    patient = world.patient(phone=PHONE)
    make_offer(world, patient)
    assert deliver() == {DeliveryOutcome.SENT: 1}
    printed = capsys.readouterr().out
    assert re.search(r"Reply YES \d{4} to take it", printed) and "/c/" in printed


def test_the_signed_curl_is_accepted_by_the_inbound_webhook(world, settings):
    settings.TEXT_INBOUND_RATE = ""
    out = StringIO()
    call_command("texts_signed_curl", "--from", PHONE, "--body", "HELP", stdout=out)
    words = shlex.split(out.getvalue())
    signature = words[words.index("-H") + 1].split(": ", 1)[1]
    fields = dict(w.split("=", 1) for i, w in enumerate(words) if i and words[i - 1] == "--data-urlencode")
    response = Client().post("/texts/twilio/inbound", fields, HTTP_X_TWILIO_SIGNATURE=signature)
    assert response.status_code == 200 and InboundText.objects.filter(provider_sid=fields["MessageSid"]).exists()
    tampered = {**fields, "Body": "YES"}
    assert Client().post("/texts/twilio/inbound", tampered, HTTP_X_TWILIO_SIGNATURE=signature).status_code == 403


def test_the_signed_curl_answers_the_newest_text_as_its_patient(world, settings):
    settings.TEXT_INBOUND_RATE, settings.NOTIFY_CONSOLE_TEXTS = "", True
    patient = world.patient(phone=PHONE)
    make_offer(world, patient)
    deliver()
    out = StringIO()
    call_command("texts_signed_curl", "--reply", "YES", stdout=out)
    words = shlex.split(out.getvalue())
    signature = words[words.index("-H") + 1].split(": ", 1)[1]
    fields = dict(w.split("=", 1) for i, w in enumerate(words) if i and words[i - 1] == "--data-urlencode")
    assert fields["From"] == PHONE and re.fullmatch(r"YES \d{4}", fields["Body"])
    response = Client().post("/texts/twilio/inbound", fields, HTTP_X_TWILIO_SIGNATURE=signature)
    assert "you are booked for" in response.content.decode()
    # The README runs the same curl twice: the same message id, the same answer, nothing more.
    again = Client().post("/texts/twilio/inbound", fields, HTTP_X_TWILIO_SIGNATURE=signature)
    assert again.content == response.content and InboundText.objects.count() == 1
    assert Appointment.objects.filter(patient=patient).count() == 1


def test_the_weekly_offer_cap_counts_offers_whatever_channel_carried_them(world, gateway):
    services.policy_publish(clinic=world.clinic, weekly_offer_cap=2, contact_cap_per_day=None,
                            decline_suppression_hours=0)
    patient = world.patient(phone=PHONE)
    world.waiting(patient)
    first = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=open_vacancy(world, seoul(3, 10)).ref)
    assert first.outcome == "OFFERED" and deliver() == {DeliveryOutcome.SENT: 1} and len(gateway.to(PHONE)) == 1
    code = re.search(r"YES (\d{4})", gateway.to(PHONE)[0]["Body"]).group(1)
    gateway.reply(PHONE, f"NO {code}")  # by text
    patient.phone = ""
    patient.save(update_fields=["phone"])
    second = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=open_vacancy(world, seoul(4, 10)).ref)
    assert second.outcome == "OFFERED" and second.offer.patient_id == patient.pk
    assert deliver() == {DeliveryOutcome.SENT: 1} and len(mail.outbox) == 1  # by e-mail
    services.offer_decline(clinic=world.clinic, offer_ref=second.offer.ref, reason="busy")
    vacancy = open_vacancy(world, seoul(5, 10))
    third = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert third.outcome == "NO_CANDIDATE"  # a text and an e-mail: two offers this week, the cap
    services.policy_publish(clinic=world.clinic, weekly_offer_cap=3)  # the control: one more allowed, offered
    again = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert again.outcome == "OFFERED" and again.offer.patient_id == patient.pk
