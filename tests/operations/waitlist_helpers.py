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


def console_seeded(world: WaitlistWorld, *, reviews) -> dict:
    """One of everything the console shows, in one order: an open offer, a booked one, a dead delivery, the
    reviews ``reviews(world)`` makes, a waiting and an opted-out entry, a slot with no candidate and a FAILED
    reevaluation job. Returns what the pages are opened at."""
    from reevaluation.models import JobState, ReevaluationJob
    from scheduling.models import Appointment, ConsentSource, ConsentState, ContactChannel
    from scheduling.services import consent_record
    from tests.reevaluation import factories as rf
    from tests.reevaluation.conftest import post_event
    from tests.waitlist.loop_helpers import open_vacancy
    from tests.worlds import ReevaluationWorld
    from waitlist import services
    from waitlist.models import Offer

    clinic = world.clinic
    offer = make_offer(world, starts_at=seoul(3, 10))
    booked = make_offer(world, starts_at=seoul(3, 14))
    services.offer_claim_and_book(offer=Offer.objects.select_related("clinic", "patient", "policy", "vacancy")
                                  .get(pk=booked.pk))
    dead_delivery_offer(world, starts_at=seoul(4, 10))
    reviewed = reviews(world)
    opted = world.waiting()
    consent_record(patient=opted.patient, channels=ContactChannel.values, state=ConsentState.REVOKED,
                   source=ConsentSource.OPT_OUT_LINK, actor_label="patient")
    world.waiting(world.patient(consent=False), treatment=world.other_treatment)
    empty = open_vacancy(world, seoul(6, 10), treatment=world.other_treatment)
    services.vacancy_dispatch(clinic=clinic, vacancy_ref=empty.ref)
    reeval = ReevaluationWorld(clinic)
    job = post_event(reeval, rf.fingerprint(f"{reeval.crm_ref}-1"), 1).job_ref
    ReevaluationJob.objects.filter(ref=job).update(state=JobState.FAILED, attempts=5,
                                                   last_failure_code="ASSESSMENT_TIMEOUT")
    return {"clinic": clinic, "offer": offer, "booked": booked, "entry": opted, "reviews": reviewed,
            "empty": empty, "job": job, "reeval": reeval,
            "appointment": Appointment.objects.filter(clinic=clinic, patient=booked.patient).latest("pk")}
