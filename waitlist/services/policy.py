"""The clinic's versioned waitlist policy: ``policy_publish`` is its one writer."""

from __future__ import annotations

from datetime import time

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from common.errors import ValidationFailed
from scheduling.models import Clinic

from ..models import DecisionGate, VacancyStatus, WaitlistPolicy
from ._shared import queue_dispatch

# The fields an operator may set: everything the digest covers except the version itself.
PUBLISHABLE_FIELDS = tuple(name for name in WaitlistPolicy.DIGEST_FIELDS if name != "version")


def _legacy_settings(clinic: Clinic) -> dict:
    """Quiet hours and the contact cap as clinics configured them before they were policy fields."""
    values: dict = {}
    quiet = (clinic.settings or {}).get("quiet_hours") or {}
    if quiet.get("start") and quiet.get("end") and quiet["start"] != quiet["end"]:
        values["quiet_hours_start"] = time.fromisoformat(quiet["start"])
        values["quiet_hours_end"] = time.fromisoformat(quiet["end"])
    cap = (clinic.settings or {}).get("contact_cap_per_day")
    if cap is not None:
        values["contact_cap_per_day"] = int(cap) if int(cap) > 0 else None
    return values


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
                **_legacy_settings(clinic),
            )
    except IntegrityError:  # another request made version 1 first
        return WaitlistPolicy.objects.get(clinic=clinic, version=1)


def policy_validate(policy: WaitlistPolicy) -> None:
    """Choices, validators and constraints of the model (strings such as "21:00" are converted in place).

    Raises ``ValidationFailed`` with per-field messages; nothing is written.
    """
    try:
        policy.full_clean(exclude=["clinic", "ref"], validate_unique=False)
    except ValidationError as exc:
        fields = {
            (name if name != "__all__" else "quiet_hours"): [str(m) for m in messages]
            for name, messages in exc.message_dict.items()
        }
        raise ValidationFailed("The policy is not valid.", fields=fields) from exc


def policy_publish(*, clinic: Clinic, **fields) -> WaitlistPolicy:
    """A new version with ``fields`` changed; earlier versions (and offers made under them) stay.

    ``fields`` are any of ``PUBLISHABLE_FIELDS`` (the model's help_text says what each means); bad or
    unknown values raise ``ValidationFailed`` and change nothing. Switching the decision gate to
    NOT_USED queues a dispatch of every vacancy waiting in staff review, which no longer needs one.
    """
    unknown = sorted(set(fields) - set(PUBLISHABLE_FIELDS))
    if unknown:
        raise ValidationFailed("Unknown policy fields.", fields={name: ["Unknown policy field."] for name in unknown})
    with transaction.atomic():
        current = policy_current(clinic=clinic)
        values = {name: getattr(current, name) for name in PUBLISHABLE_FIELDS}
        values.update(fields)
        policy = WaitlistPolicy(clinic=clinic, version=current.version + 1, **values)
        policy_validate(policy)
        # The unique (clinic, version) index makes a concurrent publish fail instead of forking.
        policy.save(force_insert=True)
        if current.decision_gate != DecisionGate.NOT_USED and policy.decision_gate == DecisionGate.NOT_USED:
            for vacancy_id in clinic.vacancies.filter(status=VacancyStatus.REVIEW).values_list("pk", flat=True):
                queue_dispatch(vacancy_id)
        return policy
