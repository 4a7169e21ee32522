"""Operator controls of the waitlist loop: the per-clinic switch and the tenant allowlist.

Thin commands over ``scheduling``'s audited ``feature_set`` (the flag is scheduling's row), shared by
the console, the API and the ``waitlist_rollout`` command so all three change the same thing the same way.
"""

from __future__ import annotations

from common.errors import ValidationFailed
from scheduling.models import Clinic
from scheduling.services.features import FeatureState, feature_set, feature_state

WAITLIST_FLAG = "waitlist"


def _reason(reason: str) -> str:
    if not (reason or "").strip():
        raise ValidationFailed("A reason is required.", fields={"reason": ["This field is required."]})
    return reason.strip()


def waitlist_switch_set(
    *, clinic: Clinic, enabled: bool, actor, reason: str, idempotency_key: str = "", system_label: str = "controls"
) -> FeatureState:
    """Switch the waitlist on or off for one clinic. On takes effect only while its tenant is allowed."""
    feature_set(name=WAITLIST_FLAG, actor=actor, reason=_reason(reason), clinic=clinic, clinic_enabled=enabled,
                idempotency_key=idempotency_key, system_label=system_label)
    return feature_state(WAITLIST_FLAG, clinic)


def waitlist_tenant_allow(
    *, clinic: Clinic, allowed: bool, actor, reason: str, idempotency_key: str = "", system_label: str = "controls"
) -> FeatureState:
    """Put the clinic's tenant group on the rollout allowlist, or take it off (every clinic of the tenant)."""
    feature_set(name=WAITLIST_FLAG, actor=actor, reason=_reason(reason), tenant=clinic.tenant_group,
                tenant_allowed=allowed, clinic=clinic, idempotency_key=idempotency_key, system_label=system_label)
    return feature_state(WAITLIST_FLAG, clinic)
