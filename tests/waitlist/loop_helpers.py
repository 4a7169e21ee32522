"""Helpers for the operating-loop tests: make an offer, deliver the outbox, drive the claim page."""

from __future__ import annotations

import email
import re
from email import policy as email_policy

from django.test import Client

from common import outbox
from tests.conftest import seoul
from waitlist import services
from waitlist.models import Offer, OfferStatus, Vacancy
from waitlist.offers.tokens import claim_link

LINK = re.compile(r"https?://[^\s]+/claim/([^/\s]+)/")
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def open_vacancy(world, starts_at=None, **kw) -> Vacancy:
    appointment = world.confirmed(starts_at or seoul(3, 10), **kw)
    _, vacancy = services.appointment_cancel_with_vacancy(
        clinic=world.clinic, appointment_ref=appointment.ref, reason="cancelled"
    )
    return vacancy


def make_offer(world, patient=None, starts_at=None, **entry_kw) -> Offer:
    """One WAITING entry (``patient``) and a cancelled CONFIRMED slot dispatched to it."""
    entry = world.waiting(patient, **entry_kw)
    vacancy = open_vacancy(world, starts_at)
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED", result.outcome
    if patient is not None:
        assert result.offer.entry_id == entry.pk
    return result.offer


def deliver(worker: str = "w1", limit: int = 50) -> dict:
    return outbox.outbox_deliver_due(worker=worker, limit=limit)


def claim_path(offer: Offer) -> str:
    return "/claim/" + LINK.search(claim_link(offer)).group(1) + "/"


def path_from_text(text: str) -> str:
    match = LINK.search(text)
    assert match, "no claim link in the message"
    return f"/claim/{match.group(1)}/"


def mail_text(raw: str) -> str:
    message = email.message_from_string(raw, policy=email_policy.default)
    return message.get_body(preferencelist=("plain",)).get_content()


def page_client() -> Client:
    return Client(enforce_csrf_checks=True)


def submit(client: Client, path: str, action: str):
    """GET the page (for the CSRF cookie and token), then POST the form's ``action`` button."""
    page = client.get(path)
    token = CSRF.search(page.content.decode())
    assert token, page.content.decode()[:500]
    return client.post(path, {"csrfmiddlewaretoken": token.group(1), "action": action})


def review_vacancy(world, starts_at=None, patient=None, **entry_kw):
    """A vacancy sent to staff review: its best (only) candidate's decision is STALE.

    Returns ``(vacancy, entry)`` with the vacancy reloaded (status REVIEW, ``review_entry`` = entry).
    """
    from tests.waitlist.factories import decide
    from waitlist.models import DecisionStatus

    entry = world.waiting(patient, fresh=False, **entry_kw)
    decide(entry.patient, DecisionStatus.STALE)
    vacancy = open_vacancy(world, starts_at)
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "STAFF_REVIEW", result.outcome
    vacancy.refresh_from_db()
    return vacancy, entry


def let_expire(offer, clock) -> None:
    """Move ``clock`` to the offer's deadline and run expiry: the offer ends EXPIRED (unanswered)."""
    clock.move_to(offer.expires_at)
    assert services.expire_run()["expired"] == 1
    offer.refresh_from_db()
    assert offer.status == OfferStatus.EXPIRED
