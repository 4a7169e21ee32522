"""Waitlist reads (no locks). Every lookup is scoped to the clinic: foreign refs are 404."""

from __future__ import annotations

from scheduling.models import Clinic
from scheduling.scoping import scoped_get

from .models import ACTIVE_OFFER_STATUSES, Offer, Vacancy, WaitlistEntry


def entry_detail(*, clinic: Clinic, ref: str) -> WaitlistEntry:
    return scoped_get(
        WaitlistEntry.objects.select_related("patient", "treatment", "practitioner"), clinic, ref
    )


def vacancy_detail(*, clinic: Clinic, ref: str) -> tuple[Vacancy, Offer | None]:
    vacancy = scoped_get(Vacancy.objects.select_related("practitioner", "treatment", "resource"), clinic, ref)
    active = vacancy.offers.filter(status__in=ACTIVE_OFFER_STATUSES).only("ref").first()
    return vacancy, active


def offer_detail(*, clinic: Clinic, ref: str) -> Offer:
    return scoped_get(Offer.objects.select_related("vacancy", "entry", "hold"), clinic, ref)
