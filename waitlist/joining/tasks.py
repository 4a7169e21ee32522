"""Beat's jobs of self-service joining."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from scheduling.services.join_requests import join_requests_purge


@shared_task(ignore_result=True)
def purge_join_requests() -> int:
    """Delete join requests (their unproven contacts) past their keeping time: a day for an unverified one."""
    return join_requests_purge(now=timezone.now())
