"""Issue 15 part 4: one dispatch that makes an offer is a bounded number of SQL statements (counted,
not timed), and racing dispatchers claim different vacancies (``FOR NO KEY UPDATE SKIP LOCKED``).

Counted outside a test transaction (``transaction=True``), as a Celery worker runs it.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import seoul
from waitlist import services
from waitlist.models import OfferStatus

pytestmark = pytest.mark.django_db(transaction=True)

MAX_DISPATCH_STATEMENTS = 1


def _listing(queries) -> str:
    return "\n".join(f"{i + 1:2}. {q['sql'][:300]}" for i, q in enumerate(queries))


def _vacancy(world, hour=10):
    world.waiting(practitioner=world.doctor)
    appointment = world.confirmed(seoul(3, hour))
    _, vacancy = services.appointment_cancel_with_vacancy(clinic=world.clinic, appointment_ref=appointment.ref,
                                                          reason="x")
    return vacancy


def test_one_dispatch_that_makes_an_offer_is_bounded_in_statements(world):
    vacancy = _vacancy(world)
    with CaptureQueriesContext(connection) as captured:
        result = services.vacancy_dispatch_by_id(vacancy_id=vacancy.pk)
    assert result.outcome == "OFFERED" and result.offer.status == OfferStatus.OFFERED
    assert len(captured) <= MAX_DISPATCH_STATEMENTS, (
        f"{len(captured)} statements for one dispatch:\n{_listing(captured.captured_queries)}"
    )
