"""Thin Celery wrappers over the outbox services; each run is bounded and safe to repeat."""

import os
import socket

from celery import shared_task

from . import outbox


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@shared_task(name="common.tasks.deliver_outbox", ignore_result=True)
def deliver_outbox(limit: int = 50) -> dict:
    return outbox.outbox_deliver_due(worker=worker_name(), limit=limit)


@shared_task(name="common.tasks.reclaim_outbox", ignore_result=True)
def reclaim_outbox(limit: int = 500) -> int:
    return outbox.outbox_reclaim_expired(limit=limit)
