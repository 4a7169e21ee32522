"""Races of self-service joining on real PostgreSQL connections (issue 40)."""

from __future__ import annotations

import re

import pytest
from django.core import mail

from common.errors import DomainError
from common.outbox import outbox_deliver_due
from scheduling.models import JoinRequest, Patient
from tests.conftest import race
from tests.waitlist.joining_helpers import body, delivered_code, open_joining
from waitlist.joining.api import join_ask
from waitlist.joining.services import join_request_submit, join_request_verify
from waitlist.models import WaitlistEntry


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_the_same_code_sent_four_times_at_once_makes_one_patient_and_one_entry(world):
    open_joining(world)
    request = join_request_submit(clinic=world.clinic, ask=join_ask(world.clinic, body(world)))
    code = delivered_code()

    def verify(_i):
        return join_request_verify(clinic=world.clinic, ref=request.ref, code=code)

    results = race(verify, 4)
    joined = [r for r in results if not isinstance(r, BaseException)]
    assert len(joined) == 1, results
    assert all(isinstance(r, DomainError) for r in results if r not in joined)
    assert WaitlistEntry.objects.count() == 1 and Patient.objects.filter(clinic=world.clinic).count() == 1
    assert not JoinRequest.objects.exists()


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_two_requests_of_one_new_contact_verified_at_once_make_one_patient(world):
    open_joining(world)
    requests = [join_request_submit(clinic=world.clinic, ask=join_ask(world.clinic, body(world))) for _ in range(2)]
    outbox_deliver_due(worker="t")
    by_ref = {}
    for request, message in zip(requests, mail.outbox[-2:], strict=True):
        by_ref[request.ref] = re.search(r"\b(\d{6})\b", message.body).group(1)

    def verify(i):
        ref = requests[i].ref
        return join_request_verify(clinic=world.clinic, ref=ref, code=by_ref[ref])

    results = race(verify, 2)
    assert not [r for r in results if isinstance(r, BaseException)], results  # the later one joins the same patient
    assert Patient.objects.filter(clinic=world.clinic).count() == 1
    assert WaitlistEntry.objects.count() == 1
