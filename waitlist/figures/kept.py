"""The console's figures kept a few seconds per clinic (``kept``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.conf import settings

from common.degrade import cached
from scheduling.models import Clinic

T = TypeVar("T")


def kept(name: str, clinic: Clinic, compute: Callable[[], T], *,
         setting: str = "WAITLIST_READINESS_CACHE_SECONDS") -> T:
    """``compute()``, kept per clinic for as many seconds as ``setting`` says (``WAITLIST_READINESS_CACHE_SECONDS``,
    10, unless named): the console's figures (decision freshness, fill metrics, outbox health, the provider's
    failure streak) are counts over many rows that change over minutes, and each staff member's reload would pay
    them again (at a busy clinic they were a third of a page load). The Action queue's rows and the open vacancies
    are read on every load."""
    return cached(f"waitlist:{name}:{clinic.pk}", int(getattr(settings, setting)), compute)


#: Every WAITING patient's newest decision, counted: tens of ms at a clinic of 10,000 waiting entries, and decisions
#: change over hours. Kept a minute: with consoles open at many clinics, kept 10 s it was 7 % of the storm's CPU.
FRESHNESS_SETTING = "WAITLIST_DECISION_FRESHNESS_CACHE_SECONDS"
