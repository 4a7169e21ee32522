"""Issue 26 part 1: the claim and opt-out pages are throttled per address and per token; a guessed
token is a plain 404 until the limit, and a clear 429 page after it."""

from __future__ import annotations

import pytest
from django.test import Client

from tests import factories as f
from tests.waitlist.loop_helpers import claim_path, make_offer
from waitlist.offers.tokens import optout_token_make

CLOSED_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture
def rates(settings):
    settings.PATIENT_PAGE_THROTTLE_RATES = {"address": "5/min", "token": "3/min"}


def test_guessing_claim_tokens_from_one_address_is_a_404_then_a_429(db, rates):
    client = Client()
    answers = [client.get(f"/claim/guess-{i}/", REMOTE_ADDR="198.51.100.4").status_code for i in range(6)]
    assert answers == [404] * 5 + [429]
    refused = client.get("/claim/guess-x/", REMOTE_ADDR="198.51.100.4")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert b"Too many requests" in refused.content
    assert client.get("/claim/guess-y/", REMOTE_ADDR="198.51.100.5").status_code == 404  # another address


def test_one_claim_token_is_throttled_across_addresses(world, rates):
    path = claim_path(make_offer(world, world.patient()))
    answers = [Client().get(path, REMOTE_ADDR=f"192.0.2.{i + 1}").status_code for i in range(4)]
    assert answers == [200, 200, 200, 429]


def test_guessing_optout_tokens_is_a_404_then_a_429(db, rates):
    answers = [Client().get(f"/optout/guess-{i}/", REMOTE_ADDR="198.51.100.6").status_code for i in range(6)]
    assert answers == [404] * 5 + [429]


def test_one_optout_token_is_throttled_across_addresses(clinic, rates):
    path = f"/optout/{optout_token_make(f.PatientFactory(clinic=clinic))}/"
    answers = [Client().get(path, REMOTE_ADDR=f"192.0.2.{i + 1}").status_code for i in range(4)]
    assert answers == [200, 200, 200, 429]


def test_the_pages_fail_open_when_redis_is_down(db, rates, settings):
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": CLOSED_REDIS}}
    assert [Client().get(f"/claim/g-{i}/").status_code for i in range(7)] == [404] * 7
