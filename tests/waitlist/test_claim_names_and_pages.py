"""Patient pages and notices in the patient's language (issue 25 section 4): the clinic's, practitioner's and
treatment's display names per language, the clinic's contact on every claim page, how to change a booking,
the opt-out and "book me automatically" pages' language switch, and notice texts without a double full stop."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from common.errors import NotFound, ValidationFailed
from scheduling.models import Appointment, validate_display_names
from scheduling.services import display_name_set
from tests.conftest import assert_no_pii
from tests.waitlist.loop_helpers import CSRF, claim_path, make_offer, page_client, submit
from waitlist import services
from waitlist.notices.confirmation import booking_notice_text
from waitlist.notices.offer_notice import offer_notice_text
from waitlist.offers.tokens import optout_link, standing_link

ADDRESS, PHONE = "123 Teheran-ro, Gangnam-gu, Seoul 06133", "+82 2-555-0100"
ADDRESS_KO = "서울특별시 강남구 테헤란로 123"
DOUBLE_STOP = re.compile(r"\.\s*\.(?!\.)")  # ". ." or ".." (an ellipsis "..." is not one)


@pytest.fixture
def korean_names(world):
    clinic = world.clinic
    clinic.settings = {"contact": {"address": ADDRESS, "address_ko": ADDRESS_KO, "phone": PHONE}}
    clinic.save(update_fields=["settings"])
    display_name_set(clinic=clinic, kind="clinic", ref=clinic.ref, language="ko", name="강남 클리닉")
    display_name_set(clinic=clinic, kind="practitioner", ref=world.doctor.ref, language="ko", name="서지원 원장")
    display_name_set(clinic=clinic, kind="treatment", ref=world.treatment.ref, language="ko", name="물리치료")
    for row in (world.clinic, world.doctor, world.treatment):
        row.refresh_from_db()
    return world


def _path(link: str, prefix: str) -> str:
    return prefix + link.rsplit(prefix, 1)[1]


def test_the_korean_claim_page_names_clinic_practitioner_and_treatment_in_korean(korean_names):
    world = korean_names
    patient = world.patient(language="ko")
    offer = make_offer(world, patient)
    html = page_client().get(claim_path(offer)).content.decode()
    for expected in ("강남 클리닉", "서지원 원장", "물리치료", ADDRESS_KO, PHONE, "2030년 12월 3일 화요일",
                     "오전 10:00–오전 10:30", "서울 시간", "담당 의료진"):
        assert expected in html, expected
    assert world.clinic.name not in html and world.doctor.name not in html and ADDRESS not in html
    english = page_client().get(claim_path(offer) + "?lang=en").content.decode()
    assert world.clinic.name in english and world.doctor.name in english and world.treatment.name in english
    assert ADDRESS in english and "강남 클리닉" not in english
    assert_no_pii(html + english, [patient])


def test_after_accepting_the_page_gives_the_reference_calendar_and_how_to_change_it(korean_names):
    world = korean_names
    offer = make_offer(world, world.patient(language="en"))
    html = submit(page_client(), claim_path(offer), "accept").content.decode()
    appointment = Appointment.objects.get(source_hold__offer=offer)
    assert "Your appointment is confirmed" in html and appointment.ref in html and 'data-testid="calendar"' in html
    assert f"Please call the clinic at {PHONE} as early as you can and give your booking reference" in html
    korean = page_client().get(claim_path(offer) + "?lang=ko").content.decode()
    assert "예약 번호" in korean and "강남 클리닉" in korean and f"병원({PHONE})으로 전화하셔서" in korean


def test_a_held_and_an_ended_offer_show_the_slot_and_the_clinics_phone(korean_names, frozen_clock):
    world = korean_names
    offer = make_offer(world, world.patient(language="ko"))
    services.offer_withdraw(clinic=world.clinic, offer_ref=offer.ref, actor=world.staff, reason="r")
    html = page_client().get(claim_path(offer)).content.decode()
    assert "병원에서 이 제안을 철회했습니다" in html and "서지원 원장" in html and PHONE in html


def test_offer_and_booking_notices_use_the_display_names_and_never_double_a_full_stop(korean_names):
    world = korean_names
    offer = make_offer(world, world.patient(language="ko"))
    for language in ("en", "ko"):
        subject, body = offer_notice_text(offer, "https://x.example/claim/t/", language)
        assert not DOUBLE_STOP.search(subject + "\n" + body), body
    subject, body = offer_notice_text(offer, "https://x.example/claim/t/", "ko")
    assert subject == "강남 클리닉에 예약 가능한 시간이 생겼습니다"
    for expected in ("강남 클리닉에 물리치료 예약 가능한 시간이 생겼습니다.", "날짜: 2030년 12월 3일 화요일",
                     "시간: 오전 10:00–오전 10:30 (서울 시간)", "담당 의료진: 서지원 원장",
                     "까지 이 시간을 잡아 두었습니다."):
        assert expected in body, expected
    _subject, english = offer_notice_text(offer, "https://x.example/claim/t/", "en")
    assert "It is held for you until Dec. 1, 2030, 1:54 p.m. (Seoul time)." in english
    assert f"A {world.treatment.name} appointment at {world.clinic.name} is available for you." in english
    submit(page_client(), claim_path(offer), "accept")
    appointment = Appointment.objects.get(source_hold__offer=offer)
    for language in ("en", "ko"):
        subject, body = booking_notice_text(appointment, language=language, calendar="https://x.example/c.ics")
        assert not DOUBLE_STOP.search(subject + "\n" + body), body
    _s, korean = booking_notice_text(appointment, language="ko", calendar="")
    assert "강남 클리닉 물리치료 예약이 확정되었습니다." in korean and ADDRESS_KO in korean
    assert f"예약을 취소하거나 변경하시려면 병원으로 전화해 주세요: {PHONE}" in korean


def test_the_opt_out_page_honours_the_language_and_offers_the_switch(korean_names):
    world = korean_names
    patient = world.patient(language="ko")
    path = _path(optout_link(patient), "/optout/")
    client = page_client()
    korean = client.get(path)
    html = korean.content.decode()
    assert korean["Content-Language"] == "ko" and '<html lang="ko">' in html and "강남 클리닉" in html
    assert 'href="?lang=en"' in html and 'name="lang" value="ko"' in html
    english = client.get(path + "?lang=en")
    html = english.content.decode()
    assert english["Content-Language"] == "en" and "Stop waiting-list messages?" in html
    assert world.clinic.name in html and 'href="?lang=ko"' in html and 'name="lang" value="en"' in html
    token = CSRF.search(html).group(1)
    done = client.post(path, {"csrfmiddlewaretoken": token, "lang": "en"})
    assert done["Content-Language"] == "en" and "You will get no more messages" in done.content.decode()
    assert "더 이상 메시지를 보내 드리지 않습니다" in client.get(path).content.decode()
    assert_no_pii(html, [patient])


def test_an_english_patient_reads_the_opt_out_page_in_korean_by_the_switch(world):
    path = _path(optout_link(world.patient(language="en")), "/optout/")
    html = page_client().get(path + "?lang=ko").content.decode()
    assert "대기 목록 메시지를 그만 받으시겠습니까?" in html and 'href="?lang=en"' in html


def test_the_standing_page_names_clinic_and_treatment_in_korean_and_switches(korean_names):
    world = korean_names
    entry = world.waiting(world.patient(language="ko"))
    path = _path(standing_link(entry), "/standing/")
    html = page_client().get(path).content.decode()
    assert "강남 클리닉" in html and "물리치료" in html and 'href="?lang=en"' in html
    english = page_client().get(path + "?lang=en").content.decode()
    assert world.clinic.name in english and world.treatment.name in english and "Book me automatically?" in english


def test_display_names_are_validated_and_set_by_the_command(world):
    with pytest.raises(ValidationError):
        validate_display_names({"fr": "Clinique"})
    with pytest.raises(ValidationError):
        validate_display_names(["ko"])
    with pytest.raises(ValidationError):
        validate_display_names({"ko": "  "})
    validate_display_names({"ko": "강남 클리닉", "en": "Gangnam"})
    with pytest.raises(ValidationFailed):
        display_name_set(clinic=world.clinic, kind="resource", ref="rs_x", language="ko", name="x")
    with pytest.raises(NotFound):  # another clinic's practitioner is a missing one
        from tests import factories as f

        other = f.PractitionerFactory()
        display_name_set(clinic=world.clinic, kind="practitioner", ref=other.ref, language="ko", name="x")
    out = StringIO()
    call_command("scheduling_display_name", "--clinic", world.clinic.ref, "--treatment", world.treatment.ref,
                 "--language", "ko", "--name", "물리치료", stdout=out)
    world.treatment.refresh_from_db()
    assert world.treatment.name_in("ko") == "물리치료" and world.treatment.name_in("en") == world.treatment.name
    call_command("scheduling_display_name", "--clinic", world.clinic.ref, "--treatment", world.treatment.ref,
                 "--language", "ko", "--name", "", stdout=out)
    world.treatment.refresh_from_db()
    assert world.treatment.name_in("ko") == world.treatment.name  # removed: the name again
    shown = StringIO()
    call_command("scheduling_display_name", "--clinic", world.clinic.ref, stdout=shown)
    assert world.treatment.ref in shown.getvalue()
    with pytest.raises(CommandError):
        call_command("scheduling_display_name", "--clinic", world.clinic.ref, "--language", "fr", "--name", "x")


def test_the_demo_clinic_has_korean_names_and_the_seed_prints_an_opt_out_link(db):
    from scheduling.models import Clinic

    out = StringIO()
    call_command("seed_demo", stdout=out)
    gangnam = Clinic.objects.get(ref="cl_demo_gangnam")
    assert gangnam.name_in("ko") == "강남 클리닉"
    assert {p.name_in("ko") for p in gangnam.practitioners.all()} == {"서지원 원장", "박민호 원장"}
    assert {t.name_in("ko") for t in gangnam.treatments.all()} == {"물리치료", "진료 상담"}
    line = next(line for line in out.getvalue().splitlines() if "Opt-out page of demo patient" in line)
    assert line.startswith("  ") and "/optout/" in line
    path = "/optout/" + line.rsplit("/optout/", 1)[1]
    html = page_client().get(path).content.decode()
    assert "강남 클리닉" in html and "대기 목록 메시지" in html
