"""The clinic's versioned waitlist policy."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from common.errors import ValidationFailed, VersionConflict
from common.services import audit_record
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


def policy_change(
    *,
    clinic: Clinic,
    actor,
    reason: str,
    changes: dict,
    expected_version: int | None = None,
    idempotency_key: str = "",
    system_label: str = "policy",
) -> WaitlistPolicy:
    """ADMIN command: validate ``changes`` to the editable fields, publish them as a new version and
    audit old → new (version, digest, changed fields). Nothing changes on a refusal.

    Refusals: VALIDATION_ERROR (unknown or invalid field, blank reason), POLICY_UNCHANGED (the values
    equal the current version's), VERSION_CONFLICT (``expected_version`` is not the current one).
    """
    if not (reason or "").strip():
        raise ValidationFailed("A reason is required.", fields={"reason": ["This field is required."]})
    editable = WaitlistPolicy.editable_fields()
    unknown = sorted(set(changes) - set(editable))
    if unknown:
        raise ValidationFailed("Not an editable policy field.", fields={name: ["Not editable."] for name in unknown})
    with transaction.atomic():
        # Changes of one clinic's policy queue here, so expected_version is checked against the truth.
        Clinic.objects.select_for_update(no_key=True).filter(pk=clinic.pk).first()
        current = policy_current(clinic=clinic)
        if expected_version is not None and expected_version != current.version:
            raise VersionConflict(f"The policy is at version {current.version}.")
        changed = {name: value for name, value in changes.items() if getattr(current, name) != value}
        if not changed:
            raise ValidationFailed("Nothing to change: these are the current values.", code="POLICY_UNCHANGED")
        values = {name: getattr(current, name) for name in editable}
        candidate = WaitlistPolicy(clinic=clinic, version=current.version + 1, **{**values, **changed})
        try:
            candidate.full_clean(exclude=["ref", "clinic", "version"], validate_unique=False)
        except ValidationError as exc:
            raise ValidationFailed("The policy is not valid.", fields=exc.message_dict) from exc
        try:
            with transaction.atomic():
                policy = policy_publish(clinic=clinic, **changed)
        except IntegrityError as exc:  # a publish that did not take the clinic lock won the version
            raise VersionConflict("The policy changed meanwhile; read it again.") from exc
        diff = {name: [_plain(getattr(current, name)), _plain(value)] for name, value in changed.items()}
        audit_record(
            actor=actor, action="waitlist.policy_publish", clinic=clinic, target_ref=policy.ref, reason=reason,
            idempotency_key=idempotency_key, system_label=system_label,
            result={"version": policy.version, "digest": policy.digest(), "previous_version": current.version,
                    "previous_digest": current.digest(), "changed": diff},
        )
        return policy


def _plain(value):
    """JSON-safe for the audit row (times and the like become their ISO text)."""
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)
