"""Read-only admin: states, versions and policies change only through the services."""

from django.contrib import admin

from common.admin import ReadOnlyAdmin
from waitlist import models


@admin.register(models.WaitlistEntry)
class WaitlistEntryAdmin(ReadOnlyAdmin):
    list_display = ("ref", "clinic", "status", "priority_rank", "waiting_since", "version")
    list_filter = ("clinic", "status")
    search_fields = ("ref",)


@admin.register(models.Vacancy)
class VacancyAdmin(ReadOnlyAdmin):
    list_display = ("ref", "clinic", "status", "starts_at", "version")
    list_filter = ("clinic", "status")
    search_fields = ("ref", "vacancy_key")


@admin.register(models.Offer)
class OfferAdmin(ReadOnlyAdmin):
    list_display = ("ref", "clinic", "status", "expires_at", "policy_version", "version")
    list_filter = ("clinic", "status")
    search_fields = ("ref",)


@admin.register(models.OfferEvent)
class OfferEventAdmin(ReadOnlyAdmin):
    """Append-only history."""

    list_display = ("offer", "from_status", "to_status", "reason_code", "actor", "created_at")
    list_filter = ("to_status", "reason_code")


@admin.register(models.OfferClaimReceipt)
class OfferClaimReceiptAdmin(ReadOnlyAdmin):
    list_display = ("ref", "offer", "hold_ref", "hold_expires_at", "created_at")


@admin.register(models.WaitlistPolicy)
class WaitlistPolicyAdmin(ReadOnlyAdmin):
    """A policy version is immutable: publish a new version (console, API, `waitlist_policy`)."""

    list_display = ("clinic", "version", "hold_minutes", "min_lead_minutes", "stale_action", "created_at")
    list_filter = ("clinic",)


@admin.register(models.BookingReliabilityDecision)
class BookingReliabilityDecisionAdmin(ReadOnlyAdmin):
    list_display = ("decision_ref", "clinic", "status", "priority_rank", "expires_at", "received_at")
    list_filter = ("clinic", "status")


@admin.register(models.JobRun)
class JobRunAdmin(ReadOnlyAdmin):
    list_display = ("name", "last_run_at", "cursor")


@admin.register(models.VacancySkip)
class VacancySkipAdmin(ReadOnlyAdmin):
    list_display = ("vacancy", "entry", "actor", "created_at")
