"""Feature flags: reads are one query; writes are audited commands.

The rollout follows the seed: a flag starts off ("rollout: false"), then tenants are added to its
allowlist one by one; a clinic of an allowed tenant can still be switched off alone. With no flag
row, ``FEATURE_DEFAULTS`` decides (``WAITLIST_ENABLED_BY_DEFAULT``, off unless set).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef

from common.fastpath import PreparedQuery
from common.services import audit_record

from ..models import Clinic, ClinicFeatureSwitch, FeatureFlag, TenantGroup


def feature_default(name: str) -> bool:
    return bool(getattr(settings, "FEATURE_DEFAULTS", {}).get(name, False))


@dataclass(frozen=True)
class FeatureState:
    """Why a feature is on or off for one clinic (states only, for the console and the API)."""

    name: str
    effective: bool
    flag_exists: bool
    enabled: bool
    all_tenants: bool
    tenant_allowed: bool
    clinic_switch: bool | None  # None: never switched (the clinic follows its tenant)
    version: int

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "effective": self.effective,
            "enabled": self.enabled,
            "all_tenants": self.all_tenants,
            "tenant_allowed": self.tenant_allowed,
            "clinic_switch": self.clinic_switch,
            "version": self.version,
        }


def _flag_for_clinic(name: str, clinic_id: int, tenant_group_id: int):
    return (
        FeatureFlag.objects.filter(name=name)
        .annotate(
            tenant_allowed=Exists(FeatureFlag.tenant_allowlist.through.objects.filter(
                featureflag_id=OuterRef("pk"), tenantgroup_id=tenant_group_id)),
            clinic_off=Exists(ClinicFeatureSwitch.objects.filter(flag=OuterRef("pk"), clinic_id=clinic_id,
                                                                 enabled=False)),
            clinic_on=Exists(ClinicFeatureSwitch.objects.filter(flag=OuterRef("pk"), clinic_id=clinic_id,
                                                                enabled=True)),
        )
        .order_by("pk")[:1]
    )


#: The flag's parts for one clinic: read by every dispatch and every notice (compiled once per process).
_FLAG_FOR_CLINIC: PreparedQuery[FeatureFlag] = PreparedQuery(_flag_for_clinic, str, int, int)


def feature_state(name: str, clinic: Clinic) -> FeatureState:
    """The flag's parts for ``clinic`` in one query; with no flag row, the setting's default."""
    # The annotations (tenant_allowed, clinic_off, clinic_on) are not model fields: read untyped.
    flag: Any = _FLAG_FOR_CLINIC.first(name, clinic.pk, clinic.tenant_group_id)
    if flag is None:
        default = feature_default(name)
        return FeatureState(name, default, False, True, default, False, None, 0)
    switch = False if flag.clinic_off else (True if flag.clinic_on else None)
    effective = flag.enabled and (flag.all_tenants or flag.tenant_allowed) and not flag.clinic_off
    return FeatureState(name, effective, True, flag.enabled, flag.all_tenants, flag.tenant_allowed, switch,
                        flag.version)


def feature_enabled(name: str, clinic: Clinic) -> bool:
    """On for ``clinic``? With no flag row, the default from ``FEATURE_DEFAULTS`` applies."""
    return feature_state(name, clinic).effective


def _lock_flag(name: str) -> FeatureFlag:
    """The flag row, locked; made on first change from the default (on globally, every tenant iff the default)."""
    flag = FeatureFlag.objects.select_for_update(no_key=True).filter(name=name).first()
    if flag is not None:
        return flag
    try:
        with transaction.atomic():
            FeatureFlag.objects.create(name=name, enabled=True, all_tenants=feature_default(name))
    except IntegrityError:  # another change made it first
        pass
    return FeatureFlag.objects.select_for_update(no_key=True).get(name=name)


def feature_set(
    *,
    name: str,
    actor,
    reason: str,
    enabled: bool | None = None,
    all_tenants: bool | None = None,
    allow_tenants: list[TenantGroup] | None = None,
    tenant: TenantGroup | None = None,
    tenant_allowed: bool | None = None,
    clinic: Clinic | None = None,
    clinic_enabled: bool | None = None,
    idempotency_key: str = "",
    system_label: str = "feature",
) -> FeatureFlag:
    """Change a flag (globally, its whole allowlist, one tenant's place on it, or one clinic's switch)
    and audit it with the reason. Serialised on the flag row, so concurrent changes never interleave."""
    with transaction.atomic():
        flag = _lock_flag(name)
        changed: dict = {}
        if enabled is not None:
            flag.enabled = changed["enabled"] = enabled
        if all_tenants is not None:
            flag.all_tenants = changed["all_tenants"] = all_tenants
        flag.version += 1
        flag.save(update_fields=["enabled", "all_tenants", "version", "updated_at"])
        if allow_tenants is not None:
            flag.tenant_allowlist.set(allow_tenants)
            changed["allowlist"] = sorted(t.ref for t in allow_tenants)
        if tenant is not None and tenant_allowed is not None:
            (flag.tenant_allowlist.add if tenant_allowed else flag.tenant_allowlist.remove)(tenant)
            changed["tenant"], changed["tenant_allowed"] = tenant.ref, tenant_allowed
        if clinic is not None and clinic_enabled is not None:
            ClinicFeatureSwitch.objects.update_or_create(flag=flag, clinic=clinic, defaults={"enabled": clinic_enabled})
            changed["clinic_enabled"] = clinic_enabled
        audit_record(actor=actor, action=f"feature.{name}.set", clinic=clinic, target_ref=name, reason=reason,
                     idempotency_key=idempotency_key, result={"version": flag.version, **changed},
                     system_label=system_label)
        return flag
