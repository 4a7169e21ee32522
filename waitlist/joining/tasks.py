"""Beat's jobs of self-service joining."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from scheduling.services.join_requests import join_requests_purge
from waitlist.joining.upkeep import upkeep_ask_due, upkeep_pause_silent


@shared_task(ignore_result=True)
def purge_join_requests() -> int:
    """Delete join requests (their unproven contacts) past their keeping time: a day for an unverified one."""
    return join_requests_purge(now=timezone.now())


@shared_task(ignore_result=True)
def upkeep() -> dict:
    """Ask the entries that waited long enough whether they still need an earlier time; pause the silent ones."""
    return {"asked": upkeep_ask_due(), "paused": upkeep_pause_silent()}
