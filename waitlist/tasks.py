"""Thin Celery wrappers: ids in, service call, nothing else (a re-run is a no-op by CAS).

Beat entries live in the ``# --- waitlist ---`` block of config/settings.py; each job is also a
management command (``waitlist_expire``, ``waitlist_reconcile``; delivery is ``deliver_outbox``).
Services never import this module: they name an after-commit effect (``common.effects``) and
``register_effects`` (run at app ready) says which task carries it out.
"""

from __future__ import annotations

from celery import shared_task

from common import effects
from common.errors import NotFound

from .services import expire_run, reconcile_run, vacancy_dispatch_by_id
from .services._shared import DISPATCH_EFFECT


@shared_task
def dispatch_vacancy(vacancy_id: int) -> str:
    try:
        return vacancy_dispatch_by_id(vacancy_id=vacancy_id).outcome
    except NotFound:
        return "MISSING"


@shared_task(ignore_result=True)
def expire_offers(limit: int | None = None) -> int:
    return expire_run(limit=limit)["expired"]


@shared_task(ignore_result=True)
def reconcile(limit: int | None = None) -> dict:
    return reconcile_run(limit=limit)


def _queue_dispatch(*, vacancy_id: int) -> None:
    dispatch_vacancy.delay(vacancy_id)  # looked up at send time (tests and the simulator stub ``delay``)


def register_effects() -> None:
    effects.register(DISPATCH_EFFECT, _queue_dispatch)
