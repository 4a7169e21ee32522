"""Thin Celery wrappers: ids in, service call, nothing else (a re-run is a no-op by CAS).

Beat entries live in the ``# --- waitlist ---`` block of config/settings.py; each job is also a
management command (``waitlist_expire``, ``waitlist_reconcile``; delivery is ``deliver_outbox``).
"""

from __future__ import annotations

from celery import shared_task

from .models import Vacancy
from .services import expire_run, reconcile_run, vacancy_dispatch


@shared_task
def dispatch_vacancy(vacancy_id: int) -> str:
    vacancy = Vacancy.objects.select_related("clinic").filter(pk=vacancy_id).first()
    if vacancy is None:
        return "MISSING"
    return vacancy_dispatch(clinic=vacancy.clinic, vacancy_ref=vacancy.ref).outcome


@shared_task(ignore_result=True)
def expire_offers(limit: int | None = None) -> int:
    return expire_run(limit=limit)["expired"]


@shared_task(ignore_result=True)
def reconcile(limit: int | None = None) -> dict:
    return reconcile_run(limit=limit)
