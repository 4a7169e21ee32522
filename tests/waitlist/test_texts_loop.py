"""Texts both ways through a loopback Twilio (tests/support/twilio_gateway.py): an offer goes out as a text with
a reply code and a short link, a signed reply answers it, delivery receipts update it, a failed one falls back to
e-mail once; a bad signature, a replayed message id, an unknown sender and an ambiguous reply change nothing."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client

from common.models import AuditEntry, DeliveryOutcome, OutboxMessage
from scheduling.models import Appointment, AppointmentStatus, CapacityHold, ConsentSource, ConsentState, ContactConsent
from tests.conftest import seoul
from tests.support.twilio_gateway import twilio_gateway
from tests.waitlist.loop_helpers import deliver, let_expire, make_offer, open_vacancy
from waitlist import services
from waitlist.models import BookingAck, InboundText, Offer, OfferStatus, TextMessage, Vacancy, WaitlistEntry
from waitlist.texts.compose import segments
from waitlist.texts.services.send import link_digest

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


def _state(*, audit: bool = True):
    """Everything a reply could change: offers, appointments, consent rows, audit rows, holds, entries, vacancies,
    booking acknowledgements, texts and the outbox (what would be sent). ``audit=False``: audit rows other than
    the ``text_reply`` a matched reply always writes (what the patient said, and that it changed nothing)."""
    audits = AuditEntry.objects.exclude(action="text_reply") if not audit else AuditEntry.objects
    return (sorted(Offer.objects.values_list("ref", "status", "version")),
            sorted(Appointment.objects.values_list("ref", "status")),
            ContactConsent.objects.count(), audits.count(),
            sorted(CapacityHold.objects.values_list("ref", "status")),
            sorted(WaitlistEntry.objects.values_list("ref", "status", "version")),
            sorted(Vacancy.objects.values_list("ref", "status", "version")),
            sorted(BookingAck.objects.values_list("ref", "acknowledged_at", "released_at")),
            sorted(TextMessage.objects.values_list("ref", "status")),
            sorted(OutboxMessage.objects.values_list("ref", "status")))


def test_the_loop_from_a_cancellation_to_a_confirmation_text(world, gateway, queued_dispatches, on_commit):
    """The issue's loop in one go, each step as production runs it: a cancellation over the API queues dispatch;
    its task offers and texts; NO declines and the cascade texts the next candidate; YES with the code books; the
    confirmation goes by text; the receipts move both texts forward."""
    from tests.conftest import token_client
    from waitlist.tasks import dispatch_vacancy

    other = "+821099998888"
    patients = {PHONE: world.patient(phone=PHONE, language="en"), other: world.patient(phone=other, language="en")}
    for patient in patients.values():
        world.waiting(patient)
    appointment = world.confirmed(seoul(3, 10))
    with on_commit(execute=True):
        cancelled = token_client(world.staff).post(
            f"/api/v1/clinics/{world.clinic.ref}/appointments/{appointment.ref}/cancel", {"reason": "x"}, format="json")
    vacancy = Vacancy.objects.get(ref=cancelled.json()["vacancy"])
    assert queued_dispatches == [vacancy.pk]
    assert dispatch_vacancy(vacancy.pk) == "OFFERED"  # the queued task: the offer, and its text sent at once
    (first_phone,) = [phone for phone in patients if gateway.to(phone)]
    second_phone = other if first_phone == PHONE else PHONE
    code = CODE.search(gateway.to(first_phone)[0]["Body"]).group(1)
    queued_dispatches.clear()
    with on_commit(execute=True):
        assert "waiting list" in gateway.reply(first_phone, f"NO {code}").content.decode()
    assert queued_dispatches == [vacancy.pk]  # the cascade
    assert dispatch_vacancy(vacancy.pk) == "OFFERED"
    text = gateway.to(second_phone)[0]
    code = CODE.search(text["Body"]).group(1)
    assert gateway.receipt(text["sid"], "delivered").status_code == 204
    answer = gateway.reply(second_phone, f"YES {code}").content.decode()
    assert "you are booked for Tue 3 Dec 10:00 at 123 Teheran-ro" in answer
    booked = Appointment.objects.get(patient=patients[second_phone], status=AppointmentStatus.CONFIRMED)
    assert booked.starts_at == seoul(3, 10)
    assert deliver() == {DeliveryOutcome.SENT: 1}
    confirmation = gateway.to(second_phone)[-1]
    assert "you are booked for Tue 3 Dec 10:00" in confirmation["Body"]
    gateway.receipt(confirmation["sid"], "delivered")
    assert sorted(TextMessage.objects.filter(patient=patients[second_phone]).values_list("kind", "status")) == [
        ("BOOKED", "DELIVERED"), ("OFFER", "DELIVERED")]
    assert len(gateway.to(first_phone)) == 1  # the first patient heard once, and answered


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


def test_the_short_link_is_stored_only_as_its_hash(world, gateway):
    patient = world.patient(phone=PHONE)
    offer, body, _code = _offer_texted(world, gateway, patient)
    code = SHORT.search(body).group(1).removeprefix("/c/")
    assert len(code) >= 11  # 64 random bits, URL-safe
    text = TextMessage.objects.get(offer=offer)
    assert text.link_digest == link_digest(code)
    stored = " ".join(str(v) for v in TextMessage.objects.values().get().values())
    assert code not in stored


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


def test_yes_under_booking_command_leaves_the_offer_accepted_for_the_clinic_to_book(world, gateway):
    services.policy_publish(clinic=world.clinic, confirmation="BOOKING_COMMAND")
    patient = world.patient(phone=PHONE, language="en")
    offer, _body, code = _offer_texted(world, gateway, patient)
    answer = gateway.reply(PHONE, f"YES {code}").content.decode()
    assert "is held for you; the clinic will confirm" in answer
    offer.refresh_from_db()
    offer.hold.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED and offer.hold.status == "ACCEPTED"
    assert not Appointment.objects.filter(patient=patient).exists()
    assert gateway.reply(PHONE, f"YES {code}").content.decode() == answer  # the same answer again


def test_a_yes_after_the_window_follows_the_late_accept_rules(world, gateway, frozen_clock):
    patient = world.patient(phone=PHONE, language="en")
    offer, _body, code = _offer_texted(world, gateway, patient)
    let_expire(offer, frozen_clock)
    answer = gateway.reply(PHONE, f"YES {code}").content.decode()
    assert "you are booked for" in answer
    renewal = Offer.objects.get(renews=offer)
    assert renewal.status == OfferStatus.ACCEPTED
    assert Appointment.objects.get(patient=patient).status == AppointmentStatus.CONFIRMED


def test_a_yes_after_the_window_is_refused_where_the_policy_has_no_late_accept(world, gateway, frozen_clock):
    services.policy_publish(clinic=world.clinic, late_accept=False)
    patient = world.patient(phone=PHONE, language="ko")
    offer, _body, code = _offer_texted(world, gateway, patient)
    let_expire(offer, frozen_clock)
    before = _state(audit=False)
    answer = gateway.reply(PHONE, f"네 {code}").content.decode()
    assert "종료" in answer and _state(audit=False) == before


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
    before = _state(audit=False)
    again = gateway.reply(PHONE, "Y").content
    assert again == first and Appointment.objects.filter(patient=patient).count() == 1
    assert _state(audit=False) == before


def test_a_second_yes_after_the_confirmation_text_replays_the_first_answer(world, gateway):
    patient = world.patient(phone=PHONE)
    _offer, _body, code = _offer_texted(world, gateway, patient)
    first = gateway.reply(PHONE, f"YES {code}").content
    assert deliver() == {DeliveryOutcome.SENT: 1} and len(gateway.to(PHONE)) == 2  # the confirmation text
    before = _state(audit=False)
    # With its code, or bare: the offer's text and its confirmation are about one booking, not two questions.
    assert gateway.reply(PHONE, f"YES {code}").content == first
    assert gateway.reply(PHONE, "yes").content == first
    assert _state(audit=False) == before


def test_no_declines_with_sms_decline_and_the_next_candidate_is_texted(world, gateway):
    first, second = world.patient(phone=PHONE), world.patient(phone="+821099998888")
    offer, _body, code = _offer_texted(world, gateway, first)
    world.waiting(second)
    assert "waiting list" in gateway.reply(PHONE, f"NO {code}").content.decode()
    offer.refresh_from_db()
    assert offer.status == OfferStatus.DECLINED and offer.decline_reason == "SMS_DECLINE"
    audit = AuditEntry.objects.get(action="text_reply")
    assert audit.reason == "NO" and audit.result["message_sid"].startswith("SMin") and audit.target_ref == offer.ref
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
    gateway.reply(PHONE, "START", sid="SMin" + "5" * 30)
    row = ContactConsent.objects.filter(patient=patient, channel="SMS").order_by("-id").first()
    assert row.state == ConsentState.GRANTED and row.source == ConsentSource.PATIENT_CONSENT
    assert row.evidence == "twilio:SMin" + "5" * 30
    vacancy = open_vacancy(world, seoul(4, 10), treatment=world.other_treatment)
    world.waiting(patient, treatment=world.other_treatment)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"
    assert deliver() == {DeliveryOutcome.SENT: 1} and len(gateway.to(PHONE)) == 2  # texted again


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


@pytest.mark.parametrize(("receipts", "status", "error_code"), [
    (["queued"], "QUEUED", ""), (["sent"], "SENT", ""), (["sent", "delivered"], "DELIVERED", ""),
    (["sent", "failed:30003"], "FAILED", "30003"), (["sent", "undelivered:30005"], "UNDELIVERED", "30005"),
])
def test_each_receipt_state_is_recorded_with_the_providers_error_code(world, gateway, receipts, status, error_code):
    patient = world.patient(phone=PHONE, consent=["SMS"])
    offer, _body, _code = _offer_texted(world, gateway, patient)
    sid = gateway.to(PHONE)[0]["sid"]
    for receipt in receipts:
        state, _, code = receipt.partition(":")
        assert gateway.receipt(sid, state, code).status_code == 204
    text = TextMessage.objects.get(offer=offer)
    assert (text.status, text.error_code) == (status, error_code) and text.status_at is not None


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
    patient = world.patient(phone=PHONE)
    _offer, _body, code = _offer_texted(world, gateway, patient)
    settings.TEXT_INBOUND_RATE = "2/min"
    statuses = [gateway.reply(PHONE, "HELP").status_code for _ in range(2)]
    before = _state()
    over = gateway.reply(PHONE, f"YES {code}", sid="SMin" + "9" * 30)
    assert statuses == [200, 200] and over.status_code == 429
    assert _state() == before and not InboundText.objects.filter(provider_sid="SMin" + "9" * 30).exists()
    assert gateway.reply("+821077776666", "HELP").status_code == 200  # another sender is not held back


def test_the_reply_text_itself_is_not_stored(world, gateway):
    patient = world.patient(phone=PHONE)
    _offer, _body, code = _offer_texted(world, gateway, patient)
    gateway.reply(PHONE, f"yes please {code} my secret words")
    row = InboundText.objects.get()
    assert row.word == "YES" and row.code == code
    stored = " ".join(str(v) for v in InboundText.objects.values().get().values())
    assert "secret" not in stored and "please" not in stored
