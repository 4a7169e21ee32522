"""The clinic's versioned waitlist policy: ``policy_publish`` is its one writer."""

from __future__ import annotations

from datetime import time

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from common.errors import ValidationFailed, VersionConflict
from common.fastpath import PreparedQuery
from common.services import audit_record
from scheduling.models import Clinic
from scheduling.services.features import feature_enabled
from waitlist.effects import queue_dispatch
from waitlist.models import DecisionGate, VacancyStatus, WaitlistPolicy

# The fields an operator may set: everything the digest covers except the version itself.
PUBLISHABLE_FIELDS = tuple(name for name in WaitlistPolicy.DIGEST_FIELDS if name != "version")


def _legacy_settings(clinic: Clinic) -> dict:
    """Quiet hours and the contact cap as clinics configured them before they were policy fields; a clinic
    that names no quiet hours gets the new-clinic default (``WAITLIST_NEW_CLINIC_QUIET_HOURS``)."""
    values: dict = {}
    configured = clinic.settings or {}
    if "quiet_hours" in configured:
        quiet = configured["quiet_hours"] or {}
    else:
        start, _, end = getattr(settings, "WAITLIST_NEW_CLINIC_QUIET_HOURS", "").partition("-")
        quiet = {"start": start.strip(), "end": end.strip()}
    if quiet.get("start") and quiet.get("end") and quiet["start"] != quiet["end"]:
        values["quiet_hours_start"] = time.fromisoformat(quiet["start"])
        values["quiet_hours_end"] = time.fromisoformat(quiet["end"])
    cap = (clinic.settings or {}).get("contact_cap_per_day")
    if cap is not None:
        values["contact_cap_per_day"] = int(cap) if int(cap) > 0 else None
    return values


def newest_policies(clinic_id) -> QuerySet[WaitlistPolicy]:
    """A clinic's policy versions, the current one first (``clinic_id``: a value or an ``OuterRef``)."""
    return WaitlistPolicy.objects.filter(clinic_id=clinic_id).order_by("-version")


#: The newest version of a clinic's policy: read by every dispatch, delivery and claim page (compiled once).
_NEWEST_POLICY: PreparedQuery[WaitlistPolicy] = PreparedQuery(lambda clinic_id: newest_policies(clinic_id)[:1], int)


def policy_current(*, clinic: Clinic) -> WaitlistPolicy:
    """The newest policy version; version 1 is made from the clinic's settings on first use."""
    policy = _NEWEST_POLICY.first(clinic.pk)
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


def policy_for_dispatch(*, clinic: Clinic, read: bool = True, known_on: bool = False
                        ) -> tuple[bool, WaitlistPolicy | None]:
    """What a dispatch needs of the clinic's waitlist settings, read once: whether the waitlist is on for it
    (scheduling's flag, ``controls.WAITLIST_FLAG``; not read again when ``known_on``), and when it is (and ``read``)
    its newest policy (``policy_current``)."""
    if not known_on and not feature_enabled("waitlist", clinic):
        return False, None
    return True, policy_current(clinic=clinic) if read else None


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
