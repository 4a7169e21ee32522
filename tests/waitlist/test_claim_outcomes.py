"""The claim page of an offer that is no longer open says what happened and when, in the clinic's zone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.models import Appointment
from tests import factories as f
from tests.conftest import assert_no_pii, seoul
from tests.waitlist.loop_helpers import CSRF, claim_path, make_offer, page_client, submit
from waitlist import services
from waitlist.offers.tokens import calendar_link

ADDRESS, PHONE = "123 Teheran-ro, Gangnam-gu, Seoul 06133", "+82 2-555-0100"


def text(response) -> str:
    return response.content.decode()


@pytest.fixture(autouse=True)
def fixed_window(world):
    """The times below are read for a fixed 20-minute answer window (tests/waitlist/test_windows.py has the
    lead-time one)."""
    services.policy_publish(clinic=world.clinic, answer_window="FIXED")


@pytest.fixture
def clinic_contact(world):
    world.clinic.settings = {"contact": {"address": ADDRESS, "phone": PHONE}}
    world.clinic.save(update_fields=["settings"])


def test_a_declined_offer_says_the_patient_declined_it_and_when(world, frozen_clock):
    offer = make_offer(world, world.patient(language="en"))
    frozen_clock.move_to(seoul(1, 9, 5))
    submit(page_client(), claim_path(offer), "decline")
    response = page_client().get(claim_path(offer))
    assert response.status_code == 410
    assert "You declined this time" in text(response)
    assert "You declined it at 9:05 a.m. on Sunday, Dec. 1, 2030 (Seoul time)." in text(response)
    assert "You stay on the waiting list" in text(response)


def test_a_declined_offer_in_korean(world, frozen_clock):
    offer = make_offer(world, world.patient(language="ko"))
    frozen_clock.move_to(seoul(1, 9, 5))
    submit(page_client(), claim_path(offer), "decline")
    html = text(page_client().get(claim_path(offer)))
    assert "이 시간을 거절하셨습니다" in html
    assert "2030년 12월 1일 일요일 오전 9:05(서울 시간)에 거절하셨습니다." in html


def test_an_expired_offer_says_when_it_ended(world, frozen_clock):
    offer = make_offer(world, world.patient(language="en"))
    frozen_clock.move_to(seoul(1, 9, 27))  # past the 20-minute window; the expiry job has not run yet
    response = page_client().get(claim_path(offer))
    assert response.status_code == 410 and "This offer has ended" in text(response)
    assert "This offer ended at 9:20 a.m. on Sunday, Dec. 1, 2030 (Seoul time)." in text(response)
    services.expire_run()
    assert "This offer ended at 9:20 a.m." in text(page_client().get(claim_path(offer)))  # the same once expired


def test_an_expired_offer_in_korean(world, frozen_clock):
    offer = make_offer(world, world.patient(language="ko"))
    frozen_clock.move_to(offer.expires_at)
    services.expire_run()
    html = text(page_client().get(claim_path(offer)))
    assert "이 제안은 종료되었습니다" in html
    assert "이 제안은 2030년 12월 1일 일요일 오전 9:20(서울 시간)에 만료되었습니다." in html
    assert "대기 목록에는 그대로 남아 계십니다" in html


def test_an_accepted_hold_that_ran_out_ends_at_the_holds_expiry(world, frozen_clock):
    services.policy_publish(clinic=world.clinic, confirmation="BOOKING_COMMAND")
    offer = make_offer(world)
    frozen_clock.move_to(seoul(1, 9, 10))
    submit(page_client(), claim_path(offer), "accept")  # held; nobody books it
    offer.refresh_from_db()
    frozen_clock.move_to(offer.hold.expires_at + timedelta(minutes=3))
    before_the_job = text(page_client().get(claim_path(offer)))
    assert "This offer ended at 9:30 a.m. on Sunday, Dec. 1, 2030" in before_the_job
    services.expire_run()
    html = text(page_client().get(claim_path(offer)))
    assert "This offer ended at 9:30 a.m. on Sunday, Dec. 1, 2030" in html


def test_a_withdrawn_offer_says_the_clinic_withdrew_it(world, frozen_clock):
    offer = make_offer(world, world.patient(language="en"))
    frozen_clock.move_to(seoul(1, 9, 12))
    services.offer_withdraw(clinic=world.clinic, offer_ref=offer.ref, actor=world.staff, reason="double booked")
    response = page_client().get(claim_path(offer))
    assert response.status_code == 410 and "The clinic withdrew this offer" in text(response)
    assert "The clinic withdrew this offer at 9:12 a.m. on Sunday, Dec. 1, 2030 (Seoul time)." in text(response)
    assert "double booked" not in text(response)  # staff's reason is theirs, not the patient's


def test_a_withdrawn_offer_in_korean(world):
    offer = make_offer(world, world.patient(language="ko"))
    services.offer_withdraw(clinic=world.clinic, offer_ref=offer.ref, actor=world.staff, reason="r")
    html = text(page_client().get(claim_path(offer)))
    assert "병원에서 이 제안을 철회했습니다" in html and "오전 9:00(서울 시간)에 이 제안을 철회했습니다." in html


def test_a_booked_offer_shows_the_booking_with_its_calendar_file(world, clinic_contact):
    patient = world.patient(language="en")
    offer = make_offer(world, patient)
    submit(page_client(), claim_path(offer), "accept")
    response = page_client().get(claim_path(offer))
    html = text(response)
    appointment = Appointment.objects.get(source_hold__offer=offer)
    assert response.status_code == 200 and "Your appointment is confirmed" in html
    for expected in (world.doctor.name, "Tuesday, Dec. 3, 2030", "10 a.m.–10:30 a.m.", ADDRESS, PHONE,
                     appointment.ref, 'href="tel:+822-555-0100"'):
        assert expected in html, expected
    assert f'href="{calendar_link(appointment)}"' in html
    assert_no_pii(html, [patient])


def test_a_booked_offer_in_korean(world, clinic_contact):
    offer = make_offer(world, world.patient(language="ko"))
    submit(page_client(), claim_path(offer), "accept")
    html = text(page_client().get(claim_path(offer)))
    assert "예약이 확정되었습니다" in html and "2030년 12월 3일 화요일" in html and "오전 10:00–오전 10:30" in html
    assert "담당 의료진" in html and "예약 번호" in html and "내 캘린더에 추가" in html


def test_a_booking_cancelled_later_says_so(world):
    offer = make_offer(world, world.patient(language="en"))
    submit(page_client(), claim_path(offer), "accept")
    appointment = Appointment.objects.get(source_hold__offer=offer)
    services.appointment_cancel_with_vacancy(clinic=world.clinic, appointment_ref=appointment.ref, reason="x")
    response = page_client().get(claim_path(offer))
    assert response.status_code == 410 and "This appointment was cancelled" in text(response)
    assert "Your appointment is confirmed" not in text(response)


def test_accepting_an_ended_offer_says_what_happened_and_changes_nothing(world, frozen_clock):
    """Where the clinic takes no late answers (``late_accept`` off; test_late_accept.py has the default)."""
    services.policy_publish(clinic=world.clinic, late_accept=False)
    offer = make_offer(world)
    client = page_client()
    csrf = CSRF.search(text(client.get(claim_path(offer)))).group(1)  # the page as the patient opened it
    frozen_clock.move_to(offer.expires_at)
    response = client.post(claim_path(offer), {"csrfmiddlewaretoken": csrf, "action": "accept"})
    assert response.status_code == 410 and "This offer ended at 9:20 a.m." in text(response)
    offer.refresh_from_db()
    assert offer.status == "OFFERED" and not Appointment.objects.filter(source_hold__offer=offer).exists()


def test_a_guessed_or_foreign_token_is_still_a_plain_404(world):
    offer = make_offer(world)
    other = f.ClinicFactory()
    for path in ("/claim/guess/", claim_path(offer)[:-5] + "xxxx/"):
        response = page_client().get(path)
        assert response.status_code == 404 and "This offer is no longer available" in text(response)
        assert world.clinic.name not in text(response) and other.name not in text(response)
