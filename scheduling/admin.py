from django.contrib import admin
from guardian.admin import GuardedModelAdmin

from . import models


@admin.register(models.TenantGroup)
class TenantGroupAdmin(admin.ModelAdmin):
    list_display = ("ref", "name")
    search_fields = ("ref", "name")


@admin.register(models.Clinic)
class ClinicAdmin(GuardedModelAdmin):
    list_display = ("ref", "name", "tenant_group", "timezone", "waitlist_hold_minutes", "min_lead_minutes")
    list_select_related = ("tenant_group",)
    search_fields = ("ref", "name")


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
class AppointmentAdmin(admin.ModelAdmin):
    """Read-mostly: state changes go through the services so versions and allocations stay right."""

    list_display = ("ref", "clinic", "status", "starts_at", "practitioner", "version")
    list_select_related = ("clinic", "practitioner")
    list_filter = ("clinic", "status")
    search_fields = ("ref",)
    readonly_fields = ("status", "version")


@admin.register(models.CapacityHold)
class CapacityHoldAdmin(admin.ModelAdmin):
    list_display = ("ref", "clinic", "status", "starts_at", "expires_at", "version")
    list_filter = ("clinic", "status")
    readonly_fields = ("status", "version")


@admin.register(models.CapacityAllocation)
class CapacityAllocationAdmin(admin.ModelAdmin):
    list_display = ("pk", "clinic", "practitioner", "resource", "period", "kind", "active")
    list_filter = ("clinic", "kind", "active")

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(models.FeatureFlag)
class FeatureFlagAdmin(admin.ModelAdmin):
    """Read-only here: flags change through `feature_set` so each change is audited."""

    list_display = ("name", "enabled", "all_tenants", "version", "updated_at")

    def has_change_permission(self, request, obj=None):
        return False
