"""Fast row builders for the console's waitlist tests (``waitlist_world`` is tests/worlds.py's, re-exported)."""

from __future__ import annotations

from datetime import timedelta

from common.models import OutboxMessage, OutboxStatus
from tests.conftest import seoul
from tests.waitlist.factories import WaitlistEntryFactory, decide
from tests.waitlist.loop_helpers import make_offer, review_vacancy
from tests.worlds import WaitlistWorld, waitlist_world
from waitlist.models import DecisionStatus, Vacancy, VacancyStatus


def bulk_reviews(world: WaitlistWorld, n: int, *, start: int = 0) -> list[Vacancy]:
    """``n`` vacancies in staff review, written directly (fast): each with a STALE-decision candidate."""
    vacancies = []
    for i in range(start, start + n):
        entry = WaitlistEntryFactory(clinic=world.clinic, treatment=world.treatment)
        decide(entry.patient, DecisionStatus.STALE)
        starts = seoul(3, 8) + timedelta(minutes=30 * i)
        vacancies.append(Vacancy.objects.create(
            vacancy_key=f"bulk:{world.clinic.pk}:{i}", clinic=world.clinic, tenant_group=world.clinic.tenant_group,
            practitioner=world.doctor, treatment=world.treatment, starts_at=starts,
            ends_at=starts + timedelta(minutes=30), status=VacancyStatus.REVIEW, review_entry=entry,
        ))
    return vacancies


def bulk_vacancies(world: WaitlistWorld, n: int, *, start: int = 100) -> None:
    """``n`` plain vacancies (the metrics' denominator), half of them CLOSED."""
    for i in range(start, start + n):
        starts = seoul(5, 8) + timedelta(minutes=30 * i)
        Vacancy.objects.create(
            vacancy_key=f"plain:{world.clinic.pk}:{i}", clinic=world.clinic, tenant_group=world.clinic.tenant_group,
            practitioner=world.doctor, treatment=world.treatment, starts_at=starts,
            ends_at=starts + timedelta(minutes=30), status=VacancyStatus.CLOSED if i % 2 else VacancyStatus.OPEN,
        )


def dead_delivery_offer(world: WaitlistWorld, starts_at=None):
    """An OFFERED offer whose notification is DEAD (a DELIVERY_DEAD queue row with a withdrawable offer)."""
    offer = make_offer(world, starts_at=starts_at or seoul(4, 10))
    OutboxMessage.objects.filter(aggregate_ref=offer.ref).update(
        status=OutboxStatus.DEAD, last_error_code="SMTP_UNAVAILABLE", attempts=5
    )
    return offer


__all__ = ["bulk_reviews", "bulk_vacancies", "dead_delivery_offer", "make_offer", "review_vacancy", "waitlist_world"]
