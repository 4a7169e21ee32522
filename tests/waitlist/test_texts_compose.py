"""Texts fit the medium: one or two segments (GSM-7 160/153, UCS-2 70/67), in English and Korean."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from waitlist.texts import compose
from waitlist.texts.compose import booked_text, offer_text, segments
from waitlist.texts.services.replies import reply_parse

LINK = "https://clinic.example/c/q2ZcW1-ab9E"


def _clinic(name: str, ko: str = ""):
    return SimpleNamespace(timezone="Asia/Seoul", name_in=lambda language: ko if language == "ko" and ko else name,
                           settings={"contact": {"address": "123 Teheran-ro", "phone": "+82 2-555-0100"}})


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
    ("STOP", "STOP", ""), ("unsubscribe", "STOP", ""), ("STOPALL", "STOP", ""), ("cancel", "STOP", ""),
    ("End", "STOP", ""), ("QUIT", "STOP", ""), ("Start", "START", ""), ("help", "HELP", ""),
    ("maybe 4821", "", "4821"), ("", "", ""),
])
def test_a_reply_is_read_for_one_word_and_one_code(body, word, code):
    parsed = reply_parse(body)
    assert (parsed.word, parsed.code) == (word, code)


@pytest.mark.parametrize("language", ["en", "ko"])
@pytest.mark.parametrize("automatic", [True, False])
def test_a_booked_text_fits_two_segments_with_the_time_in_the_clinics_zone(language, automatic):
    clinic = _clinic("The Very Long Named Orthopaedic and Sports Rehabilitation Clinic of Gangnam District",
                     "강남구 정형외과 및 스포츠 재활 전문 클리닉 테헤란로 본원 특별 진료소")
    text = booked_text(clinic=clinic, language=language, starts_at=datetime(2030, 12, 3, 1, tzinfo=UTC), code="4821",
                       link=LINK, automatic=automatic)
    assert segments(text) <= 2 and LINK in text and ("4821" in text) == automatic
    assert ("12월 3일(화) 10:00" if language == "ko" else "Tue 3 Dec 10:00") in text


def _answers(language: str) -> list[str]:
    clinic, when = _clinic("Gangnam Clinic", "강남 클리닉"), datetime(2030, 12, 3, 1, tzinfo=UTC)
    return [compose.booked_answer(clinic=clinic, language=language, starts_at=when),
            compose.held_answer(clinic=clinic, language=language, starts_at=when),
            compose.declined_answer(clinic=clinic, language=language),
            compose.gone_answer(clinic=clinic, language=language),
            compose.refused_answer(clinic=clinic, language=language),
            compose.release_closed_answer(clinic=clinic, language=language),
            compose.which_one_answer(language), compose.stopped_answer(language), compose.started_answer(language),
            compose.help_answer(clinic=clinic, language=language)]


def test_every_answer_is_in_the_patients_language():
    english, korean = _answers("en"), _answers("ko")
    hangul = [any("가" <= c <= "힣" for c in answer.replace("강남 클리닉", "")) for answer in korean]
    assert all(hangul), [a for a, h in zip(korean, hangul, strict=True) if not h]
    assert all(e != k for e, k in zip(english, korean, strict=True))
    assert "+82 2-555-0100" in korean[5] and "+82 2-555-0100" in korean[-1]
