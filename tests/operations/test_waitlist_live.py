"""The Waitlist page's live regions: the queue, the open vacancies and the offers in flight poll every 10 s and
answer 304 while what they show is unchanged; the queue's answer carries the count the tab title shows."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.operations.waitlist_helpers import make_offer, review_vacancy

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]
HX = {"HTTP_HX_REQUEST": "true"}


def live_url(clinic, name: str) -> str:
    return reverse("console:waitlist", kwargs={"clinic_ref": clinic.ref}) + f"?live={name}"


def page_etag(html: str, region: str) -> str:
    match = re.search(rf'id="{region}"[^>]*data-etag="&quot;([0-9a-f]+)&quot;"', html, re.S)
    assert match, region
    return f'"{match.group(1)}"'


def test_each_live_region_polls_every_ten_seconds(staff_web, world):
    html = staff_web.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    for region in ("wl-queue-rows", "wl-soon", "wl-in-flight"):
        tag = re.search(rf'<[a-z]+ id="{region}"[^>]*>', html, re.S).group(0)
        assert 'hx-trigger="every 10s, waitlist-changed from:body"' in tag and "data-live" in tag
    assert "refresh every 10 s" in html


def test_the_interval_is_the_deployments_setting(staff_web, world, settings):
    settings.CONSOLE_LIVE_SECONDS = 4
    html = staff_web.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    assert html.count('hx-trigger="every 4s, waitlist-changed from:body"') == 3
    assert "refresh every 4 s" in html


def test_a_poll_holding_the_page_etag_gets_304(staff_web, world):
    review_vacancy(world)
    html = staff_web.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    for region, name in (("wl-queue-rows", "queue"), ("wl-soon", "soon"), ("wl-in-flight", "offers")):
        response = staff_web.get(live_url(world.clinic, name), HTTP_IF_NONE_MATCH=page_etag(html, region), **HX)
        assert response.status_code == 304, name
        assert response.content == b""


def test_a_new_review_changes_the_queue_fragment(staff_web, world):
    html = staff_web.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    etag = page_etag(html, "wl-queue-rows")
    vacancy, _entry = review_vacancy(world)
    response = staff_web.get(live_url(world.clinic, "queue"), HTTP_IF_NONE_MATCH=etag, **HX)
    assert response.status_code == 200 and response["ETag"] != etag
    assert f'data-queue-ref="{vacancy.ref}"' in response.content.decode()
    assert response["X-Console-Attention"] == "1"


def test_tab_title_counts_what_needs_a_person(staff_web, world):
    review_vacancy(world)
    html = staff_web.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    assert re.search(r"<title>\(1\) Waitlist · ", html)


def test_offers_in_flight_lists_an_offered_offer(staff_web, world):
    offer = make_offer(world)
    response = staff_web.get(live_url(world.clinic, "offers"), **HX)
    assert f'data-in-flight="{offer.ref}"' in response.content.decode()


def test_live_fragment_is_scoped_to_the_users_clinic(outsider_web, world):
    assert outsider_web.get(live_url(world.clinic, "queue"), **HX).status_code == 404
