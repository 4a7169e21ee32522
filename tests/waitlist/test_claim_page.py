"""The patient claim page: language, CSRF, double submit, foreign and malformed tokens."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.core import signing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.models import Appointment, AppointmentStatus, HoldStatus
from tests.conftest import assert_no_pii, seoul
from tests.waitlist.loop_helpers import CSRF, claim_path, make_offer, page_client, submit
from waitlist import services
from waitlist.models import EntryStatus, Offer, OfferClaimReceipt, OfferEvent, OfferStatus
from waitlist.offers.tokens import SALT


def test_the_page_shows_clinic_treatment_local_time_and_time_left(world):
    world.clinic.settings = {"contact": {"address": "123 Teheran-ro, Seoul", "phone": "+82 2-555-0100"}}
    world.clinic.save(update_fields=["settings"])
    offer = make_offer(world, world.patient(language="en"))
    response = page_client().get(claim_path(offer))
    html = response.content.decode()
    assert response.status_code == 200 and response["Content-Language"] == "en"
    assert world.clinic.name in html and world.treatment.name in html and world.doctor.name in html
    assert "Tuesday, Dec. 3, 2030" in html and "10 a.m.–10:30 a.m." in html and "(Seoul time)" in html
    assert "123 Teheran-ro, Seoul" in html and 'href="tel:+822-555-0100"' in html
    # The time left in words (the lead-time window: 10 % of the 49 hours to the slot), and what the
    # countdown script needs: the seconds left and the phrases in the page's language.
    assert ">4 h 54 min left<" in html and 'data-seconds="17640"' in html and 'data-t-m="{m} min left"' in html
    assert "(until 1:54 p.m. on Sunday, Dec. 1, 2030)" in html
    assert 'name="action" value="accept"' in html and 'name="action" value="decline"' in html
    # CSP-clean: a stylesheet and a script file, no inline scripts or styles.
    assert not re.search(r"<script(?![^>]*\ssrc=)", html) and "<style" not in html and "style=" not in html
    assert "/static/waitlist/claim.css" in html and '<script src="/static/waitlist/claim.js" defer>' in html
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]


def test_the_time_left_reads_in_minutes_in_both_languages(world, frozen_clock):
    from django.utils import translation

    from waitlist.offers.pages import time_left_text

    assert [time_left_text(s) for s in (0, 59, 60, 14 * 60 + 59, 3600, 2 * 3600 + 5 * 60)] == [
        "Less than a minute left", "Less than a minute left", "1 min left", "14 min left", "1 h 0 min left",
        "2 h 5 min left"]
    with translation.override("ko"):
        assert [time_left_text(s) for s in (30, 14 * 60, 2 * 3600 + 5 * 60)] == [
            "1분 미만 남음", "14분 남음", "2시간 5분 남음"]


def test_the_korean_page_is_in_korean(world):
    patient = world.patient(language="ko")
    offer = make_offer(world, patient)
    client = page_client()
    response = client.get(claim_path(offer), HTTP_ACCEPT_LANGUAGE="en")
    html = response.content.decode()
    assert response["Content-Language"] == "ko" and '<html lang="ko">' in html
    assert "예약 가능한 시간이 생겼습니다" in html and "이 시간 수락하기" in html and "거절하기" in html
    assert "2030년 12월 3일 화요일" in html and "4시간 54분 남음" in html
    assert "Accept this time" not in html
    accepted = submit(client, claim_path(offer), "accept")
    assert "예약이 확정되었습니다" in accepted.content.decode() and "서울 시간" in accepted.content.decode()
    assert_no_pii(accepted.content.decode(), [patient])


def test_accept_holds_then_books_and_a_double_submit_shows_the_same_page(world):
    patient = world.patient()
    offer = make_offer(world, patient)
    client = page_client()
    page = client.get(claim_path(offer))
    csrf = CSRF.search(page.content.decode()).group(1)
    first = client.post(claim_path(offer), {"csrfmiddlewaretoken": csrf, "action": "accept"})
    second = client.post(claim_path(offer), {"csrfmiddlewaretoken": csrf, "action": "accept"})
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    # Booked at once: the page says what is true, "confirmed" (no stray punctuation after the time).
    assert "Your appointment is confirmed" in first.content.decode()
    assert "a.m.." not in first.content.decode()
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED and offer.version == 2
    assert OfferClaimReceipt.objects.filter(offer=offer).count() == 1
    assert list(OfferEvent.objects.filter(offer=offer).order_by("id").values_list("reason_code", flat=True)) == [
        "MATCHED", "CLAIMED", "BOOKED"]
    assert Appointment.objects.filter(patient=patient, status=AppointmentStatus.CONFIRMED).count() == 1
    # Coming back later shows the same answer, not "no longer available".
    assert "Your appointment is confirmed" in client.get(claim_path(offer)).content.decode()


def test_a_booking_failure_still_says_held_and_leaves_the_hold_for_reconcile(world, monkeypatch):
    from common.errors import Conflict
    from waitlist.offers import booking

    def refuse(**kw):
        raise Conflict("no", code="HOLD_NOT_BOOKABLE")

    monkeypatch.setattr(booking, "offer_book", refuse)
    offer = make_offer(world)
    response = submit(page_client(), claim_path(offer), "accept")
    html = response.content.decode()
    assert response.status_code == 200 and "The time is held for you" in html and "will confirm" in html
    assert "is confirmed" not in html
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED and offer.hold.status == HoldStatus.ACCEPTED
    assert not Appointment.objects.filter(patient=offer.patient, status=AppointmentStatus.CONFIRMED).exists()


def test_under_booking_command_the_accept_holds_and_waits_for_the_booking_command(world):
    from waitlist import services

    services.policy_publish(clinic=world.clinic, confirmation="BOOKING_COMMAND")
    offer = make_offer(world)
    response = submit(page_client(), claim_path(offer), "accept")
    assert response.status_code == 200 and "The time is held for you" in response.content.decode()
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED and offer.booking_requested_at is None
    assert not Appointment.objects.filter(patient=offer.patient).exists()  # nothing booked yet
    services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref)  # the booking command (staff/API)
    assert Appointment.objects.get(patient=offer.patient).status == AppointmentStatus.CONFIRMED


def test_decline_and_a_double_decline(world):
    offer = make_offer(world)
    client = page_client()
    page = client.get(claim_path(offer))
    csrf = CSRF.search(page.content.decode()).group(1)
    first = client.post(claim_path(offer), {"csrfmiddlewaretoken": csrf, "action": "decline"})
    second = client.post(claim_path(offer), {"csrfmiddlewaretoken": csrf, "action": "decline"})
    assert first.status_code == second.status_code == 200 and first.content == second.content
    assert "You declined this time" in first.content.decode()
    offer.refresh_from_db()
    assert offer.status == OfferStatus.DECLINED and offer.entry.status == EntryStatus.WAITING
    later = client.get(claim_path(offer))  # coming back later: the link is spent, and says why
    assert later.status_code == 410 and "You declined this time" in later.content.decode()


def test_posts_without_csrf_are_refused_and_change_nothing(world):
    offer = make_offer(world)
    response = page_client().post(claim_path(offer), {"action": "accept"})
    assert response.status_code == 403
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED


def test_a_token_for_offer_x_cannot_act_on_offer_y(world):
    x = make_offer(world, starts_at=seoul(3, 10))
    y = make_offer(world, starts_at=seoul(4, 10))
    client = page_client()
    # The form has no field that names an offer: whatever is posted, only X is touched.
    page = client.get(claim_path(x))
    csrf = CSRF.search(page.content.decode()).group(1)
    client.post(claim_path(x), {"csrfmiddlewaretoken": csrf, "action": "decline", "offer": y.ref})
    x.refresh_from_db()
    y.refresh_from_db()
    assert x.status == OfferStatus.DECLINED and y.status == OfferStatus.OFFERED
    # A token re-signed with another salt, or X's signature glued to Y's payload, is a plain 404.
    forged = signing.dumps({"o": y.ref, "e": y.entry.ref}, salt="another.salt")
    assert client.get(f"/claim/{forged}/").status_code == 404
    x_token = claim_path(x).split("/")[2]
    y_token = claim_path(y).split("/")[2]
    spliced = y_token.split(":")[0] + ":" + ":".join(x_token.split(":")[1:])
    assert client.get(f"/claim/{spliced}/").status_code == 404
    # Y's ref with X's entry (a genuine signature over a mismatched pair) finds nothing.
    mismatched = signing.dumps({"o": y.ref, "e": x.entry.ref}, salt=SALT)
    response = client.get(f"/claim/{mismatched}/")
    assert response.status_code == 404 and y.ref not in response.content.decode()


def test_expired_offer_and_expired_token_are_gone(world, frozen_clock, settings):
    services.policy_publish(clinic=world.clinic, late_accept=False)  # the default takes a late yes (test_late_accept)
    offer = make_offer(world, world.patient(language="ko"))
    frozen_clock.move_to(offer.expires_at)
    response = page_client().get(claim_path(offer))
    assert response.status_code == 410 and "이 제안은 종료되었습니다" in response.content.decode()
    response = submit_without_page(claim_path(offer))
    assert response.status_code == 410
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED  # an accept after the deadline claimed nothing
    Offer.objects.filter(pk=offer.pk).update(status=OfferStatus.OFFERED)
    settings.WAITLIST_CLAIM_TOKEN_MAX_AGE_MINUTES = 1
    frozen_clock.move_to(seoul(1, 9) + timedelta(minutes=2))
    too_old = page_client().get(claim_path_at(offer, seoul(1, 9)))
    assert too_old.status_code == 410 and "no longer available" in too_old.content.decode()  # says nothing more


def submit_without_page(path):
    from django.test import Client

    return Client().post(path, {"action": "accept"})


def claim_path_at(offer, when):
    import time_machine

    with time_machine.travel(when, tick=False):
        return claim_path(offer)


def test_other_methods_and_unknown_actions(world):
    offer = make_offer(world)
    client = page_client()
    assert client.put(claim_path(offer)).status_code == 403  # CSRF first, for any unsafe method
    from django.test import Client

    assert Client().put(claim_path(offer)).status_code == 405
    page = client.get(claim_path(offer))
    csrf = CSRF.search(page.content.decode()).group(1)
    response = client.post(claim_path(offer), {"csrfmiddlewaretoken": csrf, "action": "steal"})
    assert response.status_code == 400
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED


@pytest.fixture
def plain_client(settings):
    """A client without CSRF checks, and the page throttle off (hypothesis sends 100 guesses from one address)."""
    from django.test import Client

    settings.PATIENT_PAGE_THROTTLE_RATES = {}

    return Client()


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.one_of(
    st.text(max_size=300),
    st.from_regex(r"[A-Za-z0-9_\-]{0,60}:[A-Za-z0-9_\-]{0,10}:[A-Za-z0-9_\-]{0,50}", fullmatch=True),
    st.binary(max_size=80).map(lambda b: b.hex()),
))
def test_malformed_tokens_never_crash(world, plain_client, token):
    path = "/claim/" + quote(token, safe="") + "/"
    for response in (plain_client.get(path), plain_client.post(path, {"action": "accept"})):
        assert response.status_code in (404, 410), (token, response.status_code)
        body = response.content.decode()
        assert "Traceback" not in body


def test_head_on_the_claim_page_answers_like_get_without_a_body(world):
    offer = make_offer(world, world.patient(language="en"))
    response = page_client().head(claim_path(offer))
    assert response.status_code == 200 and response.content == b""
    assert response["Content-Language"] == "en"


def test_a_patient_without_a_served_language_gets_the_browsers(world):
    offer = make_offer(world, world.patient(language=""))
    response = page_client().get(claim_path(offer), HTTP_ACCEPT_LANGUAGE="ko-KR,ko;q=0.9,en;q=0.5")
    assert response["Content-Language"] == "ko" and "예약 가능한 시간이 생겼습니다" in response.content.decode()
    other = make_offer(world, world.patient(language=""), starts_at=seoul(3, 14))
    assert page_client().get(claim_path(other), HTTP_ACCEPT_LANGUAGE="fr")["Content-Language"] == "en"


def test_the_language_switch_wins_and_survives_the_post(world):
    offer = make_offer(world, world.patient(language="ko"))
    client = page_client()
    page = client.get(claim_path(offer) + "?lang=en")
    html = page.content.decode()
    assert page["Content-Language"] == "en" and 'href="?lang=ko"' in html and "한국어" in html
    assert 'name="lang" value="en"' in html
    csrf = CSRF.search(html).group(1)
    accepted = client.post(claim_path(offer), {"csrfmiddlewaretoken": csrf, "action": "accept", "lang": "en"})
    assert accepted["Content-Language"] == "en"


def test_decline_asks_for_confirmation_before_the_decline_button(world):
    html = page_client().get(claim_path(make_offer(world))).content.decode()
    ask = html.index('data-testid="decline-ask"')
    assert ask < html.index('name="action" value="decline"') and "cannot be undone" in html


def test_korean_times_put_the_am_pm_marker_before_the_clock():
    from datetime import UTC, datetime

    from django.utils import translation

    from waitlist.notices.offer_notice import local_datetime

    with translation.override("ko"):
        assert local_datetime(datetime(2030, 12, 3, 1, 0, tzinfo=UTC), "Asia/Seoul") == "2030년 12월 3일 오전 10:00"
    with translation.override("en"):
        assert local_datetime(datetime(2030, 12, 3, 1, 0, tzinfo=UTC), "Asia/Seoul") == "Dec. 3, 2030, 10 a.m."
