"""The patient's status link (issue 40 §3: "sent on joining and in every notice"): an offer's e-mail and a
waitlist booking's confirmation carry a fresh signed link that opens the patient's own status page; a text
carries it only where it still fits two segments (docs/waitlist.md)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from common.models import DeliveryOutcome
from tests.support.servers import http_receiver, smtp_sink
from tests.waitlist.loop_helpers import claim_path, deliver, mail_text, make_offer, page_client, submit
from waitlist.joining.tokens import status_token_read
from waitlist.texts.compose import offer_text, segments

STATUS = re.compile(r"https?://[^\s]+(/join/status/([^/\s]+)/)")
SHORT = "https://w.example/c/Ab3dE5gH"


def _clinic(name: str, ko: str):
    return SimpleNamespace(timezone="Asia/Seoul", name_in=lambda language: ko if language == "ko" else name)


@pytest.fixture
def smtp(settings):
    with smtp_sink() as (host, port, sink):
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
        yield sink


@pytest.mark.django_db
@pytest.mark.parametrize("language", ["en", "ko"])
def test_an_offer_email_carries_the_patients_status_link_which_opens_their_page(world, smtp, language):
    world.clinic.settings = {"notification": {"provider": "email"}}
    world.clinic.save(update_fields=["settings"])
    patient = world.patient(email="mina@patients.example", language=language)
    make_offer(world, patient)
    assert deliver() == {DeliveryOutcome.SENT: 1}
    assert smtp.received.wait(5)
    text = mail_text(smtp.messages[0]["data"])
    found = STATUS.search(text)
    assert found and status_token_read(found.group(2)) == patient.ref
    if language == "en":  # (mail_text leaves Korean as escapes; the Korean words are checked on the webhook below)
        assert "To see your place on the waiting list or change when you can come, open:" in text
    page = page_client().get(found.group(1))
    assert page.status_code == 200 and patient.display_name not in page.content.decode()


@pytest.mark.django_db
def test_a_waitlist_bookings_confirmation_carries_the_status_link(world):
    patient = world.patient(phone="+821055512345", language="ko")
    with http_receiver() as (url, seen):
        world.clinic.settings = {"notification": {"provider": "webhook", "webhook_url": url}}
        world.clinic.save(update_fields=["settings"])
        offer = make_offer(world, patient)
        deliver()
        assert submit(page_client(), claim_path(offer), "accept").status_code == 200
        assert deliver() == {DeliveryOutcome.SENT: 1}
    sent = json.loads(seen[-1]["body"])
    assert "예약이 확정되었습니다" in sent["text"] and "대기 현황을 보거나 가능한 시간을 바꾸시려면" in sent["text"]
    assert status_token_read(STATUS.search(sent["text"]).group(2)) == patient.ref


LINK = "https://waitlist.example.com/join/status/eyJwIjoicHRfQWJDZEVmR2hJaktsTW5PcCJ9:1vQx9Z:" + "x" * 43 + "/"


@pytest.mark.parametrize(("language", "name", "included"), [
    ("en", "Gangnam Clinic", True),
    ("ko", "강남 클리닉", False),  # UCS-2: 134 units in two segments, the signed link alone is over 120
])
def test_a_text_carries_the_status_link_only_where_it_fits_two_segments(language, name, included):
    clinic = _clinic("Gangnam Clinic", name)
    text = offer_text(clinic=clinic, language=language, starts_at=datetime(2030, 12, 3, 1, tzinfo=UTC),
                      expires_at=datetime(2030, 12, 2, 5, tzinfo=UTC), code="4821", link=SHORT, status_link=LINK)
    assert segments(text) <= 2 and SHORT in text and "4821" in text
    assert (LINK in text) is included


def test_a_long_clinic_name_is_not_shortened_for_the_status_link():
    """The status link is what gives way: the clinic's name is shortened only as the offer itself needs."""
    long_name = "The Very Long Named Orthopaedic and Sports Rehabilitation Clinic of Gangnam District"
    clinic = _clinic(long_name, long_name)
    kwargs = {"clinic": clinic, "language": "en", "starts_at": datetime(2030, 12, 3, 1, tzinfo=UTC),
              "expires_at": datetime(2030, 12, 2, 5, tzinfo=UTC), "code": "4821", "link": SHORT}
    assert offer_text(**kwargs, status_link=LINK) == offer_text(**kwargs)
