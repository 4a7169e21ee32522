"""Thin Celery wrappers: ids in, service call, nothing else (a re-run is a no-op by CAS)."""

from __future__ import annotations

from celery import shared_task

from .models import Vacancy
from .services import offers_expire_due, vacancy_dispatch


@shared_task
def dispatch_vacancy(vacancy_id: int) -> str:
    vacancy = Vacancy.objects.select_related("clinic").filter(pk=vacancy_id).first()
    if vacancy is None:
        return "MISSING"
    return vacancy_dispatch(clinic=vacancy.clinic, vacancy_ref=vacancy.ref).outcome


@shared_task
def expire_offers(limit: int = 100) -> int:
    return offers_expire_due(limit=limit)
