"""Feature flags: global switch, tenant allowlist, per-clinic switch, default, audit."""

from __future__ import annotations

from common.models import AuditEntry
from scheduling.services import feature_enabled, feature_set
from tests import factories as f


def test_without_a_flag_row_the_setting_default_applies(db, settings):
    clinic = f.ClinicFactory()
    settings.FEATURE_DEFAULTS = {"waitlist": True}
    assert feature_enabled("waitlist", clinic)
    settings.FEATURE_DEFAULTS = {"waitlist": False}
    assert not feature_enabled("waitlist", clinic)


def test_global_off_wins_over_everything(db, admin):
    clinic = f.ClinicFactory()
    feature_set(name="waitlist", actor=admin, reason="incident", enabled=False, all_tenants=True)
    assert not feature_enabled("waitlist", clinic)


def test_the_tenant_allowlist_limits_an_enabled_flag(db, admin):
    allowed, other = f.ClinicFactory(), f.ClinicFactory()
    feature_set(name="waitlist", actor=admin, reason="pilot", enabled=True, allow_tenants=[allowed.tenant_group])
    assert feature_enabled("waitlist", allowed)
    assert not feature_enabled("waitlist", other)


def test_a_clinic_can_be_switched_off_alone(db, admin):
    a, b = f.ClinicFactory(), f.ClinicFactory()
    feature_set(name="waitlist", actor=admin, reason="go", enabled=True, all_tenants=True)
    feature_set(name="waitlist", actor=admin, reason="staff shortage", clinic=a, clinic_enabled=False)
    assert not feature_enabled("waitlist", a)
    assert feature_enabled("waitlist", b)


def test_every_change_is_audited_with_the_actor(db, admin):
    clinic = f.ClinicFactory()
    feature_set(name="waitlist", actor=admin, reason="pilot start", clinic=clinic, clinic_enabled=True)
    entry = AuditEntry.objects.get()
    assert entry.actor == admin and entry.reason == "pilot start" and entry.clinic_ref == clinic.ref
    assert entry.action == "feature.waitlist.set"
