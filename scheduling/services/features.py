"""Feature flags: reads are one query; writes are audited commands."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef

from common.services import audit_record

from ..models import Clinic, ClinicFeatureSwitch, FeatureFlag, TenantGroup


def feature_enabled(name: str, clinic: Clinic) -> bool:
    """On for ``clinic``? With no flag row, the default from ``FEATURE_DEFAULTS`` applies."""
    flag = (
        FeatureFlag.objects.filter(name=name)
        .annotate(
            tenant_allowed=Exists(FeatureFlag.tenant_allowlist.through.objects.filter(
                featureflag_id=OuterRef("pk"), tenantgroup_id=clinic.tenant_group_id)),
            clinic_off=Exists(ClinicFeatureSwitch.objects.filter(flag=OuterRef("pk"), clinic=clinic, enabled=False)),
        )
        .first()
    )
    if flag is None:
        return bool(getattr(settings, "FEATURE_DEFAULTS", {}).get(name, False))
    return flag.enabled and (flag.all_tenants or flag.tenant_allowed) and not flag.clinic_off


def feature_set(
    *,
    name: str,
    actor,
    reason: str,
    enabled: bool | None = None,
    all_tenants: bool | None = None,
    allow_tenants: list[TenantGroup] | None = None,
    clinic: Clinic | None = None,
    clinic_enabled: bool | None = None,
) -> FeatureFlag:
    """Change a flag (globally, its allowlist, or one clinic's switch) and audit it."""
    with transaction.atomic():
        flag, _ = FeatureFlag.objects.select_for_update(no_key=True).get_or_create(name=name)
        changed = {}
        if enabled is not None:
            flag.enabled = changed["enabled"] = enabled
        if all_tenants is not None:
            flag.all_tenants = changed["all_tenants"] = all_tenants
        flag.version += 1
        flag.save(update_fields=["enabled", "all_tenants", "version", "updated_at"])
        if allow_tenants is not None:
            flag.tenant_allowlist.set(allow_tenants)
            changed["allowlist"] = sorted(t.ref for t in allow_tenants)
        if clinic is not None and clinic_enabled is not None:
            ClinicFeatureSwitch.objects.update_or_create(flag=flag, clinic=clinic, defaults={"enabled": clinic_enabled})
            changed["clinic_enabled"] = clinic_enabled
        audit_record(actor=actor, action=f"feature.{name}.set", clinic=clinic, reason=reason,
                     result={"version": flag.version, **changed}, system_label="feature")
        return flag
