"""The clinic's versioned waitlist policy."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from scheduling.models import Clinic

from ..models import WaitlistPolicy


def policy_current(*, clinic: Clinic) -> WaitlistPolicy:
    """The newest policy version; version 1 is made from the clinic's settings on first use."""
    policy = WaitlistPolicy.objects.filter(clinic=clinic).order_by("-version").first()
    if policy is not None:
        return policy
    try:
        with transaction.atomic():
            return WaitlistPolicy.objects.create(
                clinic=clinic,
                version=1,
                hold_minutes=clinic.waitlist_hold_minutes,
                min_lead_minutes=clinic.min_lead_minutes,
            )
    except IntegrityError:  # another request made version 1 first
        return WaitlistPolicy.objects.get(clinic=clinic, version=1)


def policy_publish(*, clinic: Clinic, **fields) -> WaitlistPolicy:
    """A new version with ``fields`` changed; earlier versions (and offers made under them) stay."""
    with transaction.atomic():
        current = policy_current(clinic=clinic)
        values = {name: getattr(current, name) for name in WaitlistPolicy.DIGEST_FIELDS if name != "version"}
        unknown = set(fields) - set(values)
        if unknown:
            raise TypeError(f"unknown policy fields: {sorted(unknown)}")
        values.update(fields)
        # The unique (clinic, version) index makes a concurrent publish fail instead of forking.
        return WaitlistPolicy.objects.create(clinic=clinic, version=current.version + 1, **values)
