"""Texts both ways through a loopback Twilio (tests/support/twilio_gateway.py): an offer goes out as a text with
a reply code and a short link, a signed reply answers it, delivery receipts update it, a failed one falls back to
e-mail once; a bad signature, a replayed message id, an unknown sender and an ambiguous reply change nothing."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client

from common.models import AuditEntry, DeliveryOutcome, OutboxMessage
from scheduling.models import Appointment, AppointmentStatus, ConsentSource, ConsentState, ContactConsent
from tests.conftest import seoul
from tests.support.twilio_gateway import twilio_gateway
from tests.waitlist.loop_helpers import deliver, make_offer, open_vacancy
from waitlist import services
from waitlist.models import InboundText, Offer, OfferStatus, TextMessage
from waitlist.texts.compose import segments

PHONE = "+821055512345"
CODE = re.compile(r"(?:YES|네) '?(\d{4})")
SHORT = re.compile(r"(/c/[A-Za-z0-9_-]+)")


@pytest.fixture
def gateway(settings, world):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.TEXT_INBOUND_RATE = ""
    world.clinic.settings = {"notification": {"provider": "sms"}, "contact": {"address": "123 Teheran-ro, Seoul",
                                                                              "phone": "+82 2-555-0100"}}
    world.clinic.save(update_fields=["settings"])
    with twilio_gateway(settings) as gw:
        yield gw


def _offer_texted(world, gateway, patient):
    offer = make_offer(world, patient)
    assert deliver() == {DeliveryOutcome.SENT: 1}
    body = gateway.to(patient.phone)[-1]["Body"]
    return offer, body, CODE.search(body).group(1)


def _state():
    """Everything a reply could change: offers, appointments, consent rows, audit rows."""
    return (sorted(Offer.objects.values_list("ref", "status", "version")),
            sorted(Appointment.objects.values_list("ref", "status")),
            ContactConsent.objects.count(), AuditEntry.objects.count())


def test_an_offer_goes_out_as_a_short_text_with_a_reply_code_and_a_short_link(world, gateway):
    patient = world.patient(phone=PHONE, language="en")
    offer, body, code = _offer_texted(world, gateway, patient)
    sent = gateway.to(PHONE)[0]
    assert sent["From"] == "+15005550006" and sent["StatusCallback"].endswith("/texts/twilio/status")
    assert "Tue 3 Dec 10:00" in body or re.search(r"\w{3} \d+ \w{3} 10:00", body)
    assert f"NO {code}" in body and SHORT.search(body) and segments(body) <= 2
    text = TextMessage.objects.get(offer=offer)
    assert text.reply_code == code and text.provider_sid == sent["sid"] and text.status == "QUEUED"
    offer.refresh_from_db()
    assert offer.notified_at is not None  # the answer window counts from the text


def test_the_short_link_opens_the_offers_claim_page(world, gateway):
    patient = world.patient(phone=PHONE)
    _offer, body, _code = _offer_texted(world, gateway, patient)
    response = Client().get(SHORT.search(body).group(1))
    assert response.status_code == 302 and "/claim/" in response["Location"]
    assert Client().get("/c/not-a-code").status_code == 404


def test_yes_with_the_code_books_and_answers_with_date_time_and_place_then_a_confirmation_text(world, gateway):
    patient = world.patient(phone=PHONE, language="en")
    offer, _body, code = _offer_texted(world, gateway, patient)
    answer = gateway.reply(PHONE, f"YES {code}")
    assert answer.status_code == 200 and answer["Content-Type"] == "application/xml"
    assert "you are booked for" in answer.content.decode() and "123 Teheran-ro" in answer.content.decode()
    appointment = Appointment.objects.get(patient=patient)
    assert appointment.status == AppointmentStatus.CONFIRMED and appointment.starts_at == seoul(3, 10)
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED
    audit = AuditEntry.objects.get(action="text_reply")
    assert audit.result["message_sid"].startswith("SMin") and audit.target_ref == offer.ref
    assert deliver() == {DeliveryOutcome.SENT: 1}  # the booking confirmation, by text too
    assert "you are booked for" in gateway.to(PHONE)[-1]["Body"]


def test_a_korean_patient_is_texted_and_answered_in_korean(world, gateway):
    patient = world.patient(phone=PHONE, language="ko")
    _offer, body, code = _offer_texted(world, gateway, patient)
    assert "12월 3일" in body and segments(body) <= 2
    answer = gateway.reply(PHONE, f"네 {code}").content.decode()
    assert "예약" in answer


def test_a_second_yes_replays_the_first_answer(world, gateway):
    patient = world.patient(phone=PHONE)
    _offer, _body, code = _offer_texted(world, gateway, patient)
    first = gateway.reply(PHONE, f"YES {code}").content
    before = _state()
    again = gateway.reply(PHONE, "Y").content
    assert again == first and Appointment.objects.filter(patient=patient).count() == 1
    assert _state()[:3] == before[:3]


def test_no_declines_with_sms_decline_and_the_next_candidate_is_texted(world, gateway):
    first, second = world.patient(phone=PHONE), world.patient(phone="+821099998888")
    offer, _body, code = _offer_texted(world, gateway, first)
    world.waiting(second)
    assert "waiting list" in gateway.reply(PHONE, f"NO {code}").content.decode()
    offer.refresh_from_db()
    assert offer.status == OfferStatus.DECLINED and offer.decline_reason == "SMS_DECLINE"
    nxt = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=offer.vacancy.ref)
    assert nxt.outcome == "OFFERED" and nxt.offer.patient_id == second.pk
    deliver()
    assert len(gateway.to("+821099998888")) == 1


def test_stop_opts_out_of_texts_with_the_reply_as_evidence_and_no_text_follows(world, gateway, settings):
    patient = world.patient(phone=PHONE)
    world.waiting(patient, treatment=world.other_treatment)
    _offer_texted(world, gateway, patient)
    inbound_sid = "SMin" + "7" * 30
    assert "no more texts" in gateway.reply(PHONE, "STOP", sid=inbound_sid).content.decode()
    row = ContactConsent.objects.filter(patient=patient, channel="SMS").order_by("-id").first()
    assert row.state == ConsentState.REVOKED and row.source == ConsentSource.TEXT_REPLY
    assert row.evidence == f"twilio:{inbound_sid}"
    vacancy = open_vacancy(world, seoul(4, 10), treatment=world.other_treatment)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"
    assert deliver() == {DeliveryOutcome.SENT: 1}
    assert len(gateway.to(PHONE)) == 1  # only the first: the next notice went by e-mail
    assert len(mail.outbox) == 1


def test_the_console_shows_a_stop_reply_as_an_opt_out(world, gateway):
    from tests.operations.conftest import signed_in

    patient = world.patient(phone=PHONE)
    _offer_texted(world, gateway, patient)
    gateway.reply(PHONE, "STOP")
    page = signed_in(world.staff).get(f"/console/c/{world.clinic.ref}/controls/").content.decode()
    assert patient.ref in page and "TEXT_REPLY" in page and "Opted out" in page


def test_start_after_stop_is_the_patients_new_consent(world, gateway):
    patient = world.patient(phone=PHONE)
    _offer_texted(world, gateway, patient)
    gateway.reply(PHONE, "STOP")
    gateway.reply(PHONE, "START")
    row = ContactConsent.objects.filter(patient=patient, channel="SMS").order_by("-id").first()
    assert row.state == ConsentState.GRANTED and row.source == ConsentSource.PATIENT_CONSENT


def test_help_answers_with_the_clinics_name_and_phone(world, gateway):
    patient = world.patient(phone=PHONE)
    _offer_texted(world, gateway, patient)
    before = _state()
    answer = gateway.reply(PHONE, "HELP").content.decode()
    assert world.clinic.name in answer and "+82 2-555-0100" in answer and _state() == before


def test_receipts_move_the_text_forward_only(world, gateway):
    patient = world.patient(phone=PHONE)
    offer, _body, _code = _offer_texted(world, gateway, patient)
    sid = gateway.to(PHONE)[0]["sid"]
    assert gateway.receipt(sid, "delivered").status_code == 204
    gateway.receipt(sid, "sent")
    assert TextMessage.objects.get(offer=offer).status == "DELIVERED"


def test_a_failed_text_falls_back_to_email_once(world, gateway):
    patient = world.patient(phone=PHONE, email="mina@patients.example")
    offer, _body, _code = _offer_texted(world, gateway, patient)
    sid = gateway.to(PHONE)[0]["sid"]
    gateway.receipt(sid, "failed", "30003")
    gateway.receipt(sid, "undelivered", "30005")
    text = TextMessage.objects.get(offer=offer)
    assert text.status == "FAILED" and text.error_code == "30003" and text.fallback_ref
    assert deliver() == {DeliveryOutcome.SENT: 1}
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["mina@patients.example"]
    assert "/claim/" in mail.outbox[0].body
    assert OutboxMessage.objects.filter(topic="waitlist.offer_made").count() == 2
    assert len(gateway.to(PHONE)) == 1  # the fallback is not texted again


def test_a_failed_text_without_email_consent_has_no_fallback(world, gateway):
    patient = world.patient(phone=PHONE, consent=["SMS"])
    offer, _body, _code = _offer_texted(world, gateway, patient)
    gateway.receipt(gateway.to(PHONE)[0]["sid"], "undelivered", "30005")
    assert TextMessage.objects.get(offer=offer).fallback_ref == "NONE"
    assert OutboxMessage.objects.filter(topic="waitlist.offer_made").count() == 1


def test_a_provider_refusal_is_a_bounded_failure_retried_by_the_outbox(world, gateway):
    gateway.fail_next.append((400, 21211))
    patient = world.patient(phone=PHONE)
    make_offer(world, patient)
    assert deliver() == {DeliveryOutcome.FAILED: 1}
    assert OutboxMessage.objects.get(topic="waitlist.offer_made").last_error_code == "TWILIO_REJECTED"


@pytest.mark.parametrize("signature", ["", "bm90IHRoZSBzaWduYXR1cmU="])
def test_a_reply_with_a_missing_or_bad_signature_is_403_and_changes_nothing(world, gateway, signature):
    patient = world.patient(phone=PHONE)
    _offer, _body, code = _offer_texted(world, gateway, patient)
    before = _state()
    assert gateway.reply(PHONE, f"YES {code}", signature=signature).status_code == 403
    assert _state() == before and not InboundText.objects.exists()


def test_a_receipt_with_a_bad_signature_is_403_and_changes_nothing(world, gateway):
    patient = world.patient(phone=PHONE)
    offer, _body, _code = _offer_texted(world, gateway, patient)
    assert gateway.receipt(gateway.to(PHONE)[0]["sid"], "failed", signature="x").status_code == 403
    assert TextMessage.objects.get(offer=offer).status == "QUEUED"


def test_a_replayed_message_id_changes_nothing(world, gateway):
    patient = world.patient(phone=PHONE)
    offer, _body, code = _offer_texted(world, gateway, patient)
    sid = "SMin" + "1" * 30
    gateway.reply(PHONE, f"NO {code}", sid=sid)
    before = _state()
    again = gateway.reply(PHONE, f"YES {code}", sid=sid)  # same id, other words: the first answer, nothing run
    assert "waiting list" in again.content.decode() and _state() == before
    offer.refresh_from_db()
    assert offer.status == OfferStatus.DECLINED


def test_an_unknown_sender_changes_nothing(world, gateway):
    patient = world.patient(phone=PHONE)
    _offer, _body, code = _offer_texted(world, gateway, patient)
    before = _state()
    answer = gateway.reply("+821011110000", f"YES {code}").content.decode()
    assert "could not find" in answer and _state() == before


def test_an_ambiguous_reply_asks_which_one_and_changes_nothing(world, gateway):
    patient = world.patient(phone=PHONE)
    world.waiting(patient, treatment=world.other_treatment)
    _offer_texted(world, gateway, patient)
    vacancy = open_vacancy(world, seoul(4, 10), treatment=world.other_treatment)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"
    deliver()
    codes = [CODE.search(m["Body"]).group(1) for m in gateway.to(PHONE)]
    assert len(codes) == 2 and codes[0] != codes[1]
    before = _state()
    assert "Which offer" in gateway.reply(PHONE, "YES").content.decode()
    assert "Which offer" in gateway.reply(PHONE, "YES 0000").content.decode()
    assert _state() == before


def test_yes_to_an_offer_that_is_gone_says_so(world, gateway):
    patient = world.patient(phone=PHONE, language="ko")
    offer, _body, code = _offer_texted(world, gateway, patient)
    services.offer_withdraw(clinic=world.clinic, offer_ref=offer.ref, actor=world.staff, reason="x")
    answer = gateway.reply(PHONE, f"YES {code}").content.decode()
    assert "종료" in answer and not Appointment.objects.filter(patient=patient).exists()


def test_replies_are_limited_per_sender(world, gateway, settings):
    settings.TEXT_INBOUND_RATE = "2/min"
    sender = "+821077776666"
    statuses = [gateway.reply(sender, "HELP").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_the_reply_text_itself_is_not_stored(world, gateway):
    patient = world.patient(phone=PHONE)
    _offer, _body, code = _offer_texted(world, gateway, patient)
    gateway.reply(PHONE, f"yes please {code} my secret words")
    row = InboundText.objects.get()
    assert row.word == "YES" and row.code == code
    stored = " ".join(str(v) for v in InboundText.objects.values().get().values())
    assert "secret" not in stored and "please" not in stored
