from django.contrib import admin

from .models import AuditEntry, CommandReceipt, OutboxMessage


@admin.register(CommandReceipt)
class CommandReceiptAdmin(admin.ModelAdmin):
    list_display = ("ref", "command", "scope", "status_code", "created_at")
    search_fields = ("ref", "scope")


@admin.register(OutboxMessage)
class OutboxMessageAdmin(admin.ModelAdmin):
    list_display = ("ref", "topic", "clinic_ref", "status", "attempts", "next_attempt_at")
    list_filter = ("topic", "status")


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("ref", "action", "actor_label", "clinic_ref", "created_at")
    list_filter = ("action",)

    def has_change_permission(self, request, obj=None):
        return False
