"""The console's figures kept a few seconds per clinic (``kept``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.conf import settings

from common.degrade import cached
from scheduling.models import Clinic

T = TypeVar("T")


def kept(name: str, clinic: Clinic, compute: Callable[[], T]) -> T:
    """``compute()``, kept ``WAITLIST_READINESS_CACHE_SECONDS`` per clinic: the console's figures (decision
    freshness, fill metrics, outbox health, the provider's failure streak) are counts over many rows that change
    over minutes, and each staff member's reload would pay them again (at a busy clinic they were a third of a
    page load). The Action queue's rows and the open vacancies are read on every load."""
    return cached(f"waitlist:{name}:{clinic.pk}", int(getattr(settings, "WAITLIST_READINESS_CACHE_SECONDS", 10)),
                  compute)
