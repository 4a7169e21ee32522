"""Issue 25 sections 2 and 3 on the console: short-ref search, CSV export, the overview's live counters,
opted-out patients, and an entry's activity timeline."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.urls import reverse

from scheduling.models import ConsentSource, ConsentState, ContactChannel
from scheduling.services import consent_record
from tests.conftest import seoul
from tests.operations.waitlist_helpers import make_offer
from tests.waitlist.loop_helpers import open_vacancy

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]
HX = {"HTTP_HX_REQUEST": "true"}


def _search(web, query):
    return web.get(reverse("console:search"), {"q": query})


def _opt_out(patient):
    consent_record(patient=patient, channels=ContactChannel.values, state=ConsentState.REVOKED,
                   source=ConsentSource.OPT_OUT_LINK, actor_label="patient")


def _home(web, clinic, **extra):
    return web.get(reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref}), **extra)


def _counter(html: str, key: str) -> int:
    return int(re.search(rf'data-counter="{key}">.*?<a [^>]*>(\d+)</a>', html, re.S).group(1))


def test_the_short_ref_the_lists_show_opens_the_vacancy(staff_web, world):
    offer = make_offer(world)
    response = _search(staff_web, offer.vacancy.ref[:12] + "…")
    assert response.status_code == 302 and offer.vacancy.ref in response["Location"]


def test_a_prefix_that_matches_two_refs_finds_nothing(staff_web, world):
    from waitlist.models import Vacancy

    first, second = open_vacancy(world, seoul(3, 10)), open_vacancy(world, seoul(3, 11))
    Vacancy.objects.filter(pk=first.pk).update(ref="vac_sharedAAAA1")
    Vacancy.objects.filter(pk=second.pk).update(ref="vac_sharedAAAA2")
    assert _search(staff_web, "vac_sharedAAAA").status_code == 404
    assert _search(staff_web, "vac_sharedAAAA2").status_code == 302
    assert _search(staff_web, "vac_").status_code == 404  # too short to mean one ref


def test_a_list_exports_as_csv_with_refs_and_codes_only(staff_web, world):
    offer = make_offer(world)
    response = staff_web.get(reverse("console:waitlist-list", kwargs={"clinic_ref": world.clinic.ref,
                                                                      "kind": "offers"}), {"format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:3] == ["ref", "status", "reason_code"]
    assert rows[1][0] == offer.ref and rows[1][1] == "OFFERED" and rows[1][5] == offer.vacancy.ref
    assert offer.entry.patient.display_name not in response.content.decode()


def test_the_overview_counts_only_offered_offers_as_awaiting_an_answer(staff_web, world):
    make_offer(world)
    booked = make_offer(world, starts_at=seoul(4, 10))
    from waitlist import services
    from waitlist.models import Offer

    assert services.offer_claim_and_book(
        offer=Offer.objects.select_related("clinic", "patient", "policy", "vacancy").get(pk=booked.pk)).booked
    assert _counter(_home(staff_web, world.clinic).content.decode(), "offers") == 1


def test_the_overview_counters_refresh_by_poll_and_answer_304_when_unchanged(staff_web, world):
    html = _home(staff_web, world.clinic).content.decode()
    assert 'hx-trigger="every 15s, waitlist-changed from:body"' in html and 'id="overview-live"' in html
    poll = {"HTTP_HX_REQUEST": "true", "HTTP_X_CONSOLE_POLL": "1"}
    first = _home(staff_web, world.clinic, **poll)
    assert _counter(first.content.decode(), "open") == 0
    assert _home(staff_web, world.clinic, HTTP_IF_NONE_MATCH=first["ETag"], **poll).status_code == 304
    open_vacancy(world, seoul(3, 10))
    changed = _home(staff_web, world.clinic, HTTP_IF_NONE_MATCH=first["ETag"], **poll)
    assert changed.status_code == 200 and _counter(changed.content.decode(), "open") == 1


def test_a_slot_with_no_candidate_is_an_attention_counter(staff_web, world):
    from waitlist import services

    world.waiting(world.patient(consent=False))
    vacancy = open_vacancy(world, seoul(3, 10))
    services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert _counter(_home(staff_web, world.clinic).content.decode(), "no_candidate") == 1


def test_an_opted_out_patient_shows_as_such_and_is_not_counted_as_waiting(staff_web, world):
    entry = world.waiting()
    world.waiting()
    _opt_out(entry.patient)
    assert _counter(_home(staff_web, world.clinic).content.decode(), "waiting") == 1
    html = staff_web.get(reverse("console:waitlist-list", kwargs={"clinic_ref": world.clinic.ref,
                                                                  "kind": "entries"})).content.decode()
    row = html.split(f'<tr data-ref="{entry.ref}">', 1)[1].split("</tr>", 1)[0]
    assert 'data-testid="opted-out"' in row


def test_an_entry_page_shows_its_activity_timeline(staff_web, world):
    offer = make_offer(world)
    _opt_out(offer.entry.patient)
    html = staff_web.get(reverse("console:ref", kwargs={"clinic_ref": world.clinic.ref,
                                                        "ref": offer.entry.ref})).content.decode()
    timeline = re.search(r'data-testid="entry-timeline">(.*?)</ul>', html, re.S).group(1)
    assert 'data-activity="offer"' in timeline and offer.ref in timeline and "MATCHED" in timeline
    assert 'data-activity="consent"' in timeline and 'data-code="OPT_OUT_LINK">' in timeline
    assert 'data-code="REVOKED">Opted out</span> (<span' in timeline
    assert offer.entry.patient.display_name not in html


def test_an_appointment_page_names_the_offer_and_vacancy_it_came_from(staff_web, world):
    from waitlist import services
    from waitlist.models import Offer

    offer = make_offer(world)
    services.offer_claim_and_book(offer=Offer.objects.select_related("clinic", "patient", "policy", "vacancy")
                                  .get(pk=offer.pk))
    offer.refresh_from_db()
    page = staff_web.get(_search(staff_web, offer.hold.appointment.ref)["Location"]).content.decode()
    assert offer.ref in page and offer.vacancy.ref in page
