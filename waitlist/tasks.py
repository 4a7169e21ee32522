"""Thin Celery wrappers: ids in, service call, nothing else (a re-run is a no-op by CAS).

Beat entries live in the ``# --- The waitlist ---`` block of config/settings/base.py; each job is also a
management command (``waitlist_expire``, ``waitlist_reconcile``; delivery is ``deliver_outbox``).
Services never import this module: they name an after-commit effect (``common.effects``) and
``register_effects`` (run at app ready) says which task carries it out.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.core.cache import cache
from django.db import DatabaseError

from common import effects
from common.degrade import broker_dependency
from common.errors import NotFound
from common.outbox import outbox_deliver_due, outbox_deliver_written
from common.tasks import worker_name
from scheduling.models import Clinic
from waitlist.effects import DISPATCH_EFFECT, NOTICE_EFFECT
from waitlist.figures.fairness import FAIRNESS_REFRESH_EFFECT, fairness_refresh
from waitlist.models import OFFER_TOPIC
from waitlist.services import expire_run, reconcile_run, vacancy_dispatch_by_id
from waitlist.texts import tasks as _texts_tasks  # noqa: F401  (registers the texts' beat job with this app's tasks)

logger = logging.getLogger("waitlist")

#: Outcomes whose commit wrote a notice nothing else delivers: an offer's (a booking's confirmation, a standing
#: booking's too, queues its own delivery run: ``services._shared.queue_delivery``).
NOTICE_OUTCOMES = frozenset({"OFFERED"})
#: Set while a delivery run is queued and not yet started: a storm of offers queues one run, not one each.
DELIVERY_KICK_KEY = "waitlist:delivery-kick"
#: How long a queued run is trusted to start (a lost message costs at most this, or beat's next tick).
DELIVERY_KICK_SECONDS = 10
DELIVERY_BATCH = 50


@shared_task
def dispatch_vacancy(vacancy_id: int) -> str:
    """Dispatch, then deliver the new offer's notice from this task (``outbox_deliver_written``); one this task
    could not deliver goes to a queued delivery run (a standing booking's confirmation queues its own)."""
    try:
        result = vacancy_dispatch_by_id(vacancy_id=vacancy_id)
    except NotFound:
        return "MISSING"
    if result.outcome == "OFFERED" and result.offer is not None:
        try:
            outbox_deliver_written(worker=worker_name(), topic=OFFER_TOPIC, aggregate_ref=result.offer.ref)
        except DatabaseError:
            logger.warning("vacancy %s: notice of %s left to a delivery run", vacancy_id, result.offer.ref,
                           exc_info=True)
            kick_delivery()
    return result.outcome


@shared_task(name="waitlist.tasks.deliver_notices", ignore_result=True)
def deliver_notices(limit: int = DELIVERY_BATCH) -> dict:
    """Deliver due outbox rows now rather than at beat's next tick (every 10 s, 50 rows: 5 notices/s at
    most, and up to 10 s before a patient hears of a slot). The kick is cleared *before* leasing, so a
    notice committed after this run looked is kicked again; a full batch kicks the next run itself."""
    cache.delete(DELIVERY_KICK_KEY)
    counts = outbox_deliver_due(worker=worker_name(), limit=limit)
    if sum(counts.values()) >= limit:
        kick_delivery()
    return counts


def kick_delivery() -> None:
    """Queue one ``deliver_notices`` run unless one is already queued. Never fails the caller: without
    Redis the notice waits for beat's ``deliver-outbox`` tick instead."""
    try:
        if cache.add(DELIVERY_KICK_KEY, 1, timeout=DELIVERY_KICK_SECONDS):
            deliver_notices.delay()
    except Exception as exc:  # noqa: BLE001 (kombu, redis and socket errors alike)
        broker_dependency.failed(exc)


@shared_task(ignore_result=True)
def expire_offers(limit: int | None = None) -> int:
    expired = expire_run(limit=limit)["expired"]
    if expired:  # each expiry cascades: the next candidate's notice is in the outbox now
        kick_delivery()
    return expired


@shared_task(ignore_result=True)
def reconcile(limit: int | None = None) -> dict:
    counts = reconcile_run(limit=limit)
    if counts.get("expired") or counts.get("withdrawn_no_hold") or NOTICE_OUTCOMES & set(counts.get("dispatch", {})):
        kick_delivery()
    return counts


@shared_task(ignore_result=True)
def refresh_fairness(clinic_id: int, window_days: int) -> None:
    clinic = Clinic.objects.filter(pk=clinic_id).first()
    if clinic is not None:
        fairness_refresh(clinic=clinic, window_days=window_days)


def _queue_dispatch(*, vacancy_id: int) -> None:
    dispatch_vacancy.delay(vacancy_id)  # looked up at send time (tests and the simulator stub ``delay``)


def register_effects() -> None:
    effects.register(DISPATCH_EFFECT, _queue_dispatch)
    effects.register(FAIRNESS_REFRESH_EFFECT, _queue_fairness_refresh)
    effects.register(NOTICE_EFFECT, kick_delivery)


def _queue_fairness_refresh(*, clinic_id: int, window_days: int) -> None:
    refresh_fairness.delay(clinic_id, window_days)
