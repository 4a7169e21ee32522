from django.contrib import admin
from guardian.admin import GuardedModelAdmin

from common.admin import ReadOnlyAdmin

from . import models
from .selectors import clinic_contact


@admin.register(models.TenantGroup)
class TenantGroupAdmin(admin.ModelAdmin):
    list_display = ("ref", "name")
    search_fields = ("ref", "name")


@admin.register(models.Clinic)
class ClinicAdmin(GuardedModelAdmin):
    list_display = ("ref", "name", "tenant_group", "timezone", "contact_address", "contact_phone",
                    "waitlist_hold_minutes", "min_lead_minutes")
    list_select_related = ("tenant_group",)
    search_fields = ("ref", "name")

    @admin.display(description="address (settings.contact)")
    def contact_address(self, clinic: models.Clinic) -> str:
        return clinic_contact(clinic)[0]

    @admin.display(description="phone (settings.contact)")
    def contact_phone(self, clinic: models.Clinic) -> str:
        return clinic_contact(clinic)[1]


@admin.register(models.Practitioner, models.Treatment, models.Resource)
class ClinicReferenceAdmin(admin.ModelAdmin):
    list_display = ("ref", "name", "clinic")
    list_select_related = ("clinic",)
    list_filter = ("clinic",)
    search_fields = ("ref", "name")


@admin.register(models.Patient)
class PatientAdmin(admin.ModelAdmin):
    list_display = ("ref", "clinic", "language")
    list_select_related = ("clinic",)
    list_filter = ("clinic", "language")
    search_fields = ("ref",)


@admin.register(models.Appointment)
class AppointmentAdmin(ReadOnlyAdmin):
    """Read-only: state changes go through the services so versions and allocations stay right."""

    list_display = ("ref", "clinic", "status", "starts_at", "practitioner", "version")
    list_select_related = ("clinic", "practitioner")
    list_filter = ("clinic", "status")
    search_fields = ("ref",)


@admin.register(models.CapacityHold)
class CapacityHoldAdmin(ReadOnlyAdmin):
    list_display = ("ref", "clinic", "status", "starts_at", "expires_at", "version")
    list_filter = ("clinic", "status")


@admin.register(models.CapacityAllocation)
class CapacityAllocationAdmin(ReadOnlyAdmin):
    list_display = ("pk", "clinic", "practitioner", "resource", "period", "kind", "active")
    list_filter = ("clinic", "kind", "active")


@admin.register(models.FeatureFlag)
class FeatureFlagAdmin(ReadOnlyAdmin):
    """Read-only here: flags change through `feature_set` (console, API, `waitlist_rollout`), audited."""

    list_display = ("name", "enabled", "all_tenants", "version", "updated_at")


@admin.register(models.ClinicFeatureSwitch)
class ClinicFeatureSwitchAdmin(ReadOnlyAdmin):
    list_display = ("flag", "clinic", "enabled", "updated_at")
