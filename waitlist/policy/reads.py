"""Reads for the operator controls: the switch's parts and the current policy (states and numbers only)."""

from __future__ import annotations

from typing import cast

from django.db.models import Field

from scheduling.models import Clinic
from scheduling.selectors import consent_recent
from scheduling.services.features import feature_state
from waitlist.models import WaitlistPolicy
from waitlist.policy.controls import WAITLIST_FLAG
from waitlist.policy.services import policy_current


def policy_fields(policy: WaitlistPolicy) -> list[dict]:
    """Each editable field with its label and help text from the model, in the model's order."""
    rows = []
    for name in WaitlistPolicy.editable_fields():
        field = cast(Field, WaitlistPolicy._meta.get_field(name))  # editable_fields: concrete fields only
        value = getattr(policy, name)
        rows.append({"name": name, "label": str(field.verbose_name), "help_text": str(field.help_text),
                     "value": value, "display": "—" if value is None else str(value)})
    return rows


def policy_body(policy: WaitlistPolicy) -> dict:
    """The API shape of one policy version."""
    values = {}
    for row in policy_fields(policy):
        value = row["value"]
        values[row["name"]] = value if value is None or isinstance(value, bool | int | float | str) else str(value)
    return {"ref": policy.ref, "version": policy.version, "digest": policy.digest(),
            "created_at": policy.created_at.isoformat() if policy.created_at else None, "fields": values}


def controls_snapshot(*, clinic: Clinic) -> dict:
    state = feature_state(WAITLIST_FLAG, clinic)
    policy = policy_current(clinic=clinic)
    return {"switch": state.as_dict(), "tenant_group": clinic.tenant_group.ref, "policy": policy,
            "policy_fields": policy_fields(policy), "policy_body": policy_body(policy)}


def consent_changes(*, clinic: Clinic, limit: int = 20) -> list[dict]:
    return consent_recent(clinic=clinic, limit=limit)
