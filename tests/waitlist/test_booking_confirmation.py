"""The booking confirmation notice: queued by every booking path in its transaction, delivered with its
calendar file under the offer notice's rules (consent, quiet hours, contact cap), and its .ics route."""

from __future__ import annotations

import email
import json
from datetime import UTC, datetime, time, timedelta
from email import policy as email_policy

import icalendar
import pytest
from django.db import transaction

from common.models import DeliveryOutcome, OutboxAttempt, OutboxMessage, OutboxStatus
from scheduling.models import Appointment, ConsentSource, ConsentState, ContactChannel
from scheduling.services.consent import consent_record
from tests.conftest import assert_no_pii, race, seoul, token_client
from tests.support.servers import http_receiver, smtp_sink
from tests.waitlist.loop_helpers import claim_path, deliver, make_offer, page_client, submit
from waitlist import services
from waitlist.models import OfferEvent
from waitlist.notices import confirmation as confirmations
from waitlist.notices.confirmation_services import BOOKING_CONFIRMED_TOPIC, booking_confirmation_queue
from waitlist.offers.calendar import fold
from waitlist.offers.tokens import calendar_link

ADDRESS, PHONE = "123 Teheran-ro, Gangnam-gu, Seoul 06133", "+82 2-555-0100"


@pytest.fixture
def clinic_contact(world):
    world.clinic.settings = {**world.clinic.settings, "contact": {"address": ADDRESS, "phone": PHONE}}
    world.clinic.save(update_fields=["settings"])


@pytest.fixture
def smtp(settings):
    with smtp_sink() as (host, port, sink):
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
        yield sink


def provider(world, **notification):
    world.clinic.settings = {**world.clinic.settings, "notification": notification}
    world.clinic.save(update_fields=["settings"])


def confirmations_queued():
    return OutboxMessage.objects.filter(topic=BOOKING_CONFIRMED_TOPIC)


def booked_on_the_page(world, patient=None):
    """An offer made, its notice delivered, and accepted on the claim page (ON_ACCEPT books at once)."""
    offer = make_offer(world, patient)
    deliver()
    assert submit(page_client(), claim_path(offer), "accept").status_code == 200
    return offer, Appointment.objects.get(source_hold__offer=offer)


def calendar_of(text: str):
    (event,) = icalendar.Calendar.from_ical(text).walk("VEVENT")
    return event


def path_of(link: str) -> str:
    return "/" + link.split("://", 1)[1].split("/", 1)[1]


# Queued by each booking path, in the booking's transaction


def test_the_claim_page_accept_queues_one_confirmation_with_refs_only(world):
    patient = world.patient()
    offer, appointment = booked_on_the_page(world, patient)
    message = confirmations_queued().get()
    assert message.aggregate_ref == appointment.ref and message.recipient_ref == patient.ref
    assert message.payload == {
        "offer": offer.ref, "appointment": appointment.ref, "vacancy": offer.vacancy.ref, "entry": offer.entry.ref,
        "patient": patient.ref, "booked_at": "2030-12-01T00:00:00+00:00", "template": "booking_confirmed_v1",
        "language": "en"}
    assert_no_pii(json.dumps(message.payload) + message.channel + message.recipient_ref, [patient])
    booked = OfferEvent.objects.get(offer=offer, reason_code="BOOKED")
    assert message.correlation_id == booked.correlation_id  # one story: the booking and its notice


def test_the_booking_command_over_the_api_queues_it_once_and_a_replay_adds_none(world):
    services.policy_publish(clinic=world.clinic, confirmation="BOOKING_COMMAND")
    offer = make_offer(world)
    submit(page_client(), claim_path(offer), "accept")
    assert not confirmations_queued().exists()  # ACCEPTED is not CONFIRMED: nothing to confirm yet
    offer.refresh_from_db()
    client, url = token_client(world.staff), f"/api/v1/clinics/{world.clinic.ref}/holds/{offer.hold.ref}/book"
    first = client.post(url, format="json", HTTP_IDEMPOTENCY_KEY="book-1")
    again = client.post(url, format="json", HTTP_IDEMPOTENCY_KEY="book-2")  # a retry with a new key
    assert first.status_code == 201 and again.status_code in (200, 201)
    assert again.json()["appointment"] == first.json()["appointment"]
    assert list(confirmations_queued().values_list("aggregate_ref", flat=True)) == [first.json()["appointment"]]


def test_reconcile_finishing_a_booking_queues_the_confirmation(world, frozen_clock, settings):
    offer = make_offer(world)
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1, request_booking=True)
    frozen_clock.move_to(seoul(1, 9) + timedelta(minutes=settings.WAITLIST_BOOKING_RETRY_MINUTES))
    assert services.reconcile_run()["booked"] == 1
    appointment = Appointment.objects.get(source_hold__offer=offer)
    assert confirmations_queued().get().payload["appointment"] == appointment.ref


def test_the_confirmation_is_written_in_the_bookings_transaction(world):
    offer = make_offer(world)
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)
    offer.refresh_from_db()
    with pytest.raises(RuntimeError), transaction.atomic():
        services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref)
        assert confirmations_queued().count() == 1
        raise RuntimeError("the booking's transaction rolls back")
    assert not confirmations_queued().exists() and not Appointment.objects.filter(source_hold__offer=offer).exists()


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_racing_booking_commands_confirm_the_booking_once(world):
    offer = make_offer(world)
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)
    offer.refresh_from_db()
    results = race(lambda i: services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref), 6)
    assert all(isinstance(r, tuple) for r in results), results
    assert sorted(created for _appointment, created in results) == [False] * 5 + [True]
    assert {a.pk for a, _created in results} == {Appointment.objects.get(source_hold__offer=offer).pk}
    assert confirmations_queued().count() == 1


# Delivered: text, calendar file, rules


def test_email_confirmation_says_when_who_where_and_attaches_the_calendar_file(world, smtp, clinic_contact):
    provider(world, provider="email")
    patient = world.patient(email="bora@patients.example")
    offer, appointment = booked_on_the_page(world, patient)
    smtp.messages.clear()
    assert deliver() == {DeliveryOutcome.SENT: 1}
    assert smtp.received.wait(5)
    mail = email.message_from_bytes(smtp.messages[-1]["data"].encode(), policy=email_policy.default)
    assert mail["Subject"] == f"Your appointment at {world.clinic.name} is confirmed"
    text = mail.get_body(preferencelist=("plain",)).get_content()
    for expected in ("Date: Tuesday, Dec. 3, 2030", "Time: 10 a.m.–10:30 a.m. (Seoul time)",
                     f"Practitioner: {world.doctor.name}", f"Address: {ADDRESS}", f"Clinic phone: {PHONE}",
                     f"Booking reference: {appointment.ref}", "appointment.ics) is attached", "/optout/"):
        assert expected in text, expected
    assert calendar_link(appointment) not in text  # attached, not linked
    (attachment,) = list(mail.iter_attachments())
    assert attachment.get_filename() == "appointment.ics" and attachment.get_content_type() == "text/calendar"
    event = calendar_of(attachment.get_content())
    assert event.decoded("DTSTART") == datetime(2030, 12, 3, 1, 0, tzinfo=UTC)  # 10:00 in Seoul, in UTC
    assert event.decoded("DTEND") == datetime(2030, 12, 3, 1, 30, tzinfo=UTC)
    assert str(event["SUMMARY"]) == f"{world.treatment.name} at {world.clinic.name}"
    assert str(event["LOCATION"]) == f"{world.clinic.name}, {ADDRESS}"
    assert str(event["UID"]) == f"{appointment.ref}@127.0.0.1"
    assert str(event["STATUS"]) == "CONFIRMED"
    assert offer.patient.display_name not in attachment.get_content()


def test_a_korean_sms_confirmation_links_a_signed_calendar_file_with_the_same_uid(world, clinic_contact):
    patient = world.patient(phone="+821055512345", language="ko")
    with http_receiver() as (url, seen):
        provider(world, provider="webhook", webhook_url=url)
        _offer, appointment = booked_on_the_page(world, patient)
        assert deliver() == {DeliveryOutcome.SENT: 1}
    sent = json.loads(seen[-1]["body"])
    assert sent["to"] == "+821055512345" and sent["language"] == "ko"
    for expected in ("예약이 확정되었습니다", "날짜: 2030년 12월 3일 화요일", "시간: 오전 10:00–오전 10:30 (서울 시간)",
                     f"주소: {ADDRESS}", f"예약 번호: {appointment.ref}", "캘린더에 추가하기", "/optout/"):
        assert expected in sent["text"], expected
    assert sent["link"] == calendar_link(appointment) and sent["link"] in sent["text"]
    response = page_client().get(path_of(sent["link"]))
    assert response.status_code == 200 and response["Content-Type"] == "text/calendar; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="appointment.ics"'
    event = calendar_of(response.content.decode())
    assert str(event["SUMMARY"]) == f"{world.clinic.name} {world.treatment.name}"
    assert event.decoded("DTSTART") == datetime(2030, 12, 3, 1, 0, tzinfo=UTC)
    assert str(event["UID"]) == f"{appointment.ref}@127.0.0.1"
    assert page_client().get(path_of(sent["link"])).content == response.content  # stable bytes per booking


def test_in_quiet_hours_the_confirmation_waits_for_the_morning(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, quiet_hours_start=time(21), quiet_hours_end=time(8))
    frozen_clock.move_to(seoul(1, 20, 50))
    booked_on_the_page(world)  # the offer's notice went out at 20:50; booked at once
    frozen_clock.move_to(seoul(1, 21, 1))
    assert deliver() == {DeliveryOutcome.DEFERRED: 1}
    message = confirmations_queued().get()
    assert message.status == OutboxStatus.PENDING and message.next_attempt_at == seoul(2, 8)
    assert message.last_error_code == "QUIET_HOURS" and message.attempts == 0
    frozen_clock.move_to(seoul(2, 8))
    assert deliver() == {DeliveryOutcome.SENT: 1}
    assert confirmations_queued().get().sent_at == seoul(2, 8)


def test_past_the_daily_contact_cap_the_confirmation_is_deferred(world):
    services.policy_publish(clinic=world.clinic, contact_cap_per_day=1)
    booked_on_the_page(world)  # the offer's notice was the one notice of the day
    assert deliver() == {DeliveryOutcome.DEFERRED: 1}
    message = confirmations_queued().get()
    assert message.last_error_code == "CONTACT_CAP" and message.next_attempt_at == seoul(2, 9)


def test_without_consent_nothing_is_sent(world, caplog):
    patient = world.patient()
    booked_on_the_page(world, patient)
    consent_record(patient=patient, channels=ContactChannel.values, state=ConsentState.REVOKED,
                   source=ConsentSource.OPT_OUT_LINK, actor_label="patient")
    caplog.clear()
    with caplog.at_level("INFO", logger="common.notify"):
        assert deliver() == {DeliveryOutcome.SENT: 1}
    message = confirmations_queued().get()
    assert message.last_error_code == "CONSENT_REVOKED" and message.sent_at is None
    assert OutboxAttempt.objects.get(message=message).provider == "skipped"
    assert "notice message=" not in caplog.text  # the provider never ran


def test_a_booking_cancelled_before_delivery_is_skipped_not_sent(world):
    _offer, appointment = booked_on_the_page(world)
    services.appointment_cancel_with_vacancy(clinic=world.clinic, appointment_ref=appointment.ref, reason="x")
    assert deliver() == {DeliveryOutcome.SENT: 1}
    message = confirmations_queued().get()
    assert message.last_error_code == "BOOKING_CLOSED" and message.sent_at is None  # not counted by the cap


# Standing acceptance: one template with an optional release line


@pytest.fixture
def release_links():
    previous = confirmations.release_link_register(
        lambda offer, appointment: f"https://clinic.example/release/{offer.ref}/")
    yield
    confirmations.release_link_register(previous)


@pytest.fixture
def no_release_links():
    previous = confirmations.release_link_register(None)
    yield
    confirmations.release_link_register(previous)


def queue_automatic(offer, appointment, until):
    with transaction.atomic():
        return booking_confirmation_queue(offer=offer, appointment=appointment, correlation_id="c-auto",
                                          now=seoul(1, 9), release_until=until)


def test_an_automatic_booking_says_so_with_its_release_link_and_deadline(world, release_links):
    with http_receiver() as (url, seen):
        provider(world, provider="webhook", webhook_url=url)
        offer, appointment = booked_on_the_page(world)
        deliver()
        message = queue_automatic(offer, appointment, seoul(2, 10))
        assert "http" not in json.dumps(message.payload)  # the link is a credential: built at send time
        assert message.payload["release_until"] == seoul(2, 10).isoformat()
        assert deliver() == {DeliveryOutcome.SENT: 1}
    text = json.loads(seen[-1]["body"])["text"]
    assert f"You were booked automatically for a {world.treatment.name} appointment" in text
    assert "release the time by 10 a.m. on Monday, Dec. 2, 2030" in text
    assert f"https://clinic.example/release/{offer.ref}/" in text


def test_a_booking_command_given_a_release_deadline_queues_the_automatic_notice_only(world):
    offer = make_offer(world)
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)
    offer.refresh_from_db()
    services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref, release_until=seoul(2, 10))
    (message,) = confirmations_queued()
    assert message.payload["release_until"] == seoul(2, 10).isoformat()


def test_an_automatic_booking_without_a_release_link_builder_is_not_sent_without_one(world, no_release_links):
    offer, appointment = booked_on_the_page(world)
    deliver()
    message = queue_automatic(offer, appointment, seoul(2, 10))
    assert deliver() == {DeliveryOutcome.FAILED: 1}
    message.refresh_from_db()
    assert message.last_error_code == "NO_RELEASE_LINK"


# The calendar route and the file's form


def test_the_calendar_link_is_a_credential_and_never_logged(world, caplog):
    caplog.set_level("DEBUG")
    _offer, appointment = booked_on_the_page(world)
    deliver()  # the console provider logs the notice
    link = calendar_link(appointment)
    token = link.rsplit("/", 1)[1].removesuffix(".ics")
    assert page_client().get(path_of(link)).status_code == 200
    assert "notice message=" in caplog.text and token not in caplog.text
    for record in caplog.records:
        assert token not in record.getMessage()


def test_the_calendar_route_refuses_bad_signatures_and_ended_bookings(world):
    _offer, appointment = booked_on_the_page(world)
    path = path_of(calendar_link(appointment))
    token = path.removeprefix("/claim/").removesuffix(".ics")
    client = page_client()
    assert client.get(path).status_code == 200
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert client.get(f"/claim/{tampered}.ics").status_code == 404
    claim_token = claim_path(_offer).split("/")[2]  # another salt's genuine token
    assert client.get(f"/claim/{claim_token}.ics").status_code == 404
    assert client.get("/claim/guess.ics").status_code == 404
    from django.test import Client

    assert Client().post(path).status_code == 405
    services.appointment_cancel_with_vacancy(clinic=world.clinic, appointment_ref=appointment.ref, reason="x")
    assert client.get(path).status_code == 410


def test_long_lines_fold_at_75_octets_without_splitting_a_character():
    line = "SUMMARY:" + "물리치료 예약, 강남 클리닉; " * 10
    folded = fold(line)
    parts = folded.split("\r\n")
    assert all(len(p.encode()) <= 75 for p in parts) and all(p.startswith(" ") for p in parts[1:])
    assert "".join(p[1:] if i else p for i, p in enumerate(parts)) == line
