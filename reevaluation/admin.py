"""Read-mostly admin: state changes go through services (mode/drain/redrive), not admin edits."""

from django.contrib import admin

from common.admin import ReadOnlyAdmin as _ReadOnly
from reevaluation.models import (
    ClinicReevaluationSettings,
    InboxEvent,
    QuarantineCase,
    RedrivePreview,
    ReevaluationHead,
    ReevaluationJob,
    ReevaluationOutcome,
)


@admin.register(ReevaluationJob)
class JobAdmin(_ReadOnly):
    list_display = (
        "ref",
        "clinic",
        "revision",
        "state",
        "priority_class",
        "due_at",
        "attempts",
        "last_failure_code",
    )
    list_filter = ("state", "priority_class", "last_failure_code")
    search_fields = ("ref",)


@admin.register(QuarantineCase)
class QuarantineAdmin(_ReadOnly):
    list_display = ("ref", "reason_code", "category", "source", "clinic", "created_at")
    list_filter = ("reason_code", "category", "source")


@admin.register(InboxEvent)
class InboxAdmin(_ReadOnly):
    list_display = ("ref", "event_id", "clinic", "profile_revision", "status", "received_at")
    list_filter = ("status",)


@admin.register(ReevaluationHead)
class HeadAdmin(_ReadOnly):
    list_display = ("clinic", "revision", "updated_at")


@admin.register(ReevaluationOutcome)
class OutcomeAdmin(_ReadOnly):
    list_display = ("ref", "job", "appointment_ref", "outcome", "applied", "mode")
    list_filter = ("outcome", "applied", "mode")


@admin.register(ClinicReevaluationSettings)
class SettingsAdmin(_ReadOnly):
    list_display = ("clinic", "mutation_mode", "drain_state", "consecutive_assessment_failures")


@admin.register(RedrivePreview)
class PreviewAdmin(_ReadOnly):
    list_display = ("ref", "clinic", "actor", "limit", "created_at", "executed_at")
