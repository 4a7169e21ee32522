"""The "book me automatically" page from a notice's link: grant with a minimum notice, revoke, nothing on GET,
a plain 404 for a bad token, no contact data."""

from __future__ import annotations

from tests.conftest import assert_no_pii
from tests.waitlist.loop_helpers import CSRF, page_client
from tests.waitlist.test_delivery import smtp  # noqa: F401 - the SMTP sink fixture
from waitlist.models import StandingAcceptance
from waitlist.offers.tokens import standing_link


def path_for(entry) -> str:
    return "/standing/" + standing_link(entry).rsplit("/standing/", 1)[1]


def post(client, path, **data):
    token = CSRF.search(client.get(path).content.decode()).group(1)
    return client.post(path, {"csrfmiddlewaretoken": token, **data})


def test_the_page_grants_with_the_chosen_minimum_notice(world):
    entry = world.waiting(world.patient(language="en"))
    client = page_client()
    page = client.get(path_for(entry))
    assert page.status_code == 200 and "Book me automatically?" in page.content.decode()
    assert not StandingAcceptance.objects.exists()  # a GET (a link prefetcher) changes nothing
    response = post(client, path_for(entry), action="grant", min_notice_minutes="1440")
    assert response.status_code == 200 and "You are booked automatically" in response.content.decode()
    row = StandingAcceptance.objects.get()
    assert (row.state, row.min_notice_minutes, row.source, row.actor) == ("GRANTED", 1440, "NOTICE_LINK", "patient")
    assert_no_pii(response.content.decode(), [entry.patient])


def test_the_page_revokes(world):
    entry = world.waiting()
    client = page_client()
    post(client, path_for(entry), action="grant", min_notice_minutes="0")
    response = post(client, path_for(entry), action="revoke")
    assert "Book me automatically?" in response.content.decode()
    assert list(StandingAcceptance.objects.order_by("id").values_list("state", flat=True)) == ["GRANTED", "REVOKED"]


def test_a_notice_outside_the_offered_choices_is_refused_and_records_nothing(world):
    entry = world.waiting()
    response = post(page_client(), path_for(entry), action="grant", min_notice_minutes="7")
    assert response.status_code == 400 and not StandingAcceptance.objects.exists()


def test_a_bad_token_is_a_plain_404(world):
    assert page_client().get("/standing/not-a-token/").status_code == 404


def test_the_page_speaks_the_patients_language(world):
    entry = world.waiting(world.patient(language="ko"))
    html = page_client().get(path_for(entry)).content.decode()
    assert '<html lang="ko">' in html and "자동으로 예약해 드릴까요?" in html and "Book me" not in html


def test_every_offer_notice_carries_the_book_me_automatically_link(world, smtp):
    from tests.waitlist.loop_helpers import deliver, mail_text, make_offer
    from tests.waitlist.test_delivery import email_clinic

    email_clinic(world)
    patient = world.patient(email="bora@patients.example", language="en")
    offer = make_offer(world, patient)
    deliver()
    assert smtp.received.wait(5)
    text = mail_text(smtp.messages[0]["data"])
    assert path_for(offer.entry) in text and "booked for you automatically" in text
