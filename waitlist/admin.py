"""Read-mostly admin: states and versions change only through the services."""

from django.contrib import admin

from . import models


class _ReadOnlyStateAdmin(admin.ModelAdmin):
    readonly_fields = ("status", "version")


@admin.register(models.WaitlistEntry)
class WaitlistEntryAdmin(_ReadOnlyStateAdmin):
    list_display = ("ref", "clinic", "status", "priority_rank", "waiting_since", "version")
    list_filter = ("clinic", "status")
    search_fields = ("ref",)
    readonly_fields = ("status", "version", "suppressed_until", "waiting_since")


@admin.register(models.Vacancy)
class VacancyAdmin(_ReadOnlyStateAdmin):
    list_display = ("ref", "clinic", "status", "starts_at", "version")
    list_filter = ("clinic", "status")
    search_fields = ("ref", "vacancy_key")


@admin.register(models.Offer)
class OfferAdmin(admin.ModelAdmin):
    list_display = ("ref", "clinic", "status", "expires_at", "policy_version", "version")
    list_filter = ("clinic", "status")
    search_fields = ("ref",)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.OfferEvent)
class OfferEventAdmin(admin.ModelAdmin):
    """Append-only history: no add, change or delete from the admin either."""

    list_display = ("offer", "from_status", "to_status", "reason_code", "actor", "created_at")
    list_filter = ("to_status", "reason_code")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(models.OfferClaimReceipt)
class OfferClaimReceiptAdmin(admin.ModelAdmin):
    list_display = ("ref", "offer", "hold_ref", "hold_expires_at", "created_at")

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(models.WaitlistPolicy)
class WaitlistPolicyAdmin(admin.ModelAdmin):
    """A policy version is immutable: publish a new version instead of editing."""

    list_display = ("clinic", "version", "hold_minutes", "min_lead_minutes", "stale_action", "created_at")
    list_filter = ("clinic",)

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(models.BookingReliabilityDecision)
class BookingReliabilityDecisionAdmin(admin.ModelAdmin):
    list_display = ("decision_ref", "clinic", "status", "priority_rank", "expires_at", "received_at")
    list_filter = ("clinic", "status")

    def has_change_permission(self, request, obj=None):
        return False
