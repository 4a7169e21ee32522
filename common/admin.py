from django.contrib import admin

from .models import AuditEntry, CommandReceipt, OutboxMessage


class ReadOnlyAdmin(admin.ModelAdmin):
    """For state-bearing rows: the admin reads them; every change goes through the owning service
    (which locks, checks the transition, versions and audits). Superusers included."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(CommandReceipt)
class CommandReceiptAdmin(ReadOnlyAdmin):
    list_display = ("ref", "command", "scope", "status_code", "created_at")
    search_fields = ("ref", "scope")


@admin.register(OutboxMessage)
class OutboxMessageAdmin(ReadOnlyAdmin):
    list_display = ("ref", "topic", "clinic_ref", "status", "attempts", "next_attempt_at")
    list_filter = ("topic", "status")


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("ref", "action", "actor_label", "clinic_ref", "created_at")
    list_filter = ("action",)
