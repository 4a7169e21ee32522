"""Texts fit the medium: one or two segments (GSM-7 160/153, UCS-2 70/67), in English and Korean."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from waitlist.texts.compose import offer_text, segments
from waitlist.texts.services.replies import reply_parse

LINK = "https://clinic.example/c/q2ZcW1-ab9E"


def _clinic(name: str, ko: str = ""):
    return SimpleNamespace(timezone="Asia/Seoul", name_in=lambda language: ko if language == "ko" and ko else name)


@pytest.mark.parametrize(("text", "count"), [("a" * 160, 1), ("a" * 161, 2), ("a" * 306, 2), ("a" * 307, 3),
                                             ("가" * 70, 1), ("가" * 71, 2), ("€" * 80, 1), ("€" * 81, 2)])
def test_segments_count_gsm7_ucs2_and_the_extension_table(text, count):
    assert segments(text) == count


@pytest.mark.parametrize("language", ["en", "ko"])
def test_a_long_clinic_name_is_shortened_to_keep_an_offer_in_two_segments(language):
    clinic = _clinic("The Very Long Named Orthopaedic and Sports Rehabilitation Clinic of Gangnam District",
                     "강남구 정형외과 및 스포츠 재활 전문 클리닉 테헤란로 본원 특별 진료소")
    text = offer_text(clinic=clinic, language=language, starts_at=datetime(2030, 12, 3, 1, tzinfo=UTC),
                      expires_at=datetime(2030, 12, 2, 5, tzinfo=UTC), code="4821", link=LINK)
    assert segments(text) <= 2 and "4821" in text and LINK in text
    assert ("12월 3일(화) 10:00" if language == "ko" else "Tue 3 Dec 10:00") in text


@pytest.mark.parametrize(("body", "word", "code"), [
    ("YES 4821", "YES", "4821"), ("y", "YES", ""), ("4821 yes", "YES", "4821"), ("네 4821", "YES", "4821"),
    ("예", "YES", ""), ("1", "YES", ""), ("No thanks 4821", "NO", "4821"), ("아니요", "NO", ""),
    ("STOP", "STOP", ""), ("unsubscribe", "STOP", ""), ("Start", "START", ""), ("help", "HELP", ""),
    ("maybe 4821", "", "4821"), ("", "", ""),
])
def test_a_reply_is_read_for_one_word_and_one_code(body, word, code):
    parsed = reply_parse(body)
    assert (parsed.word, parsed.code) == (word, code)
