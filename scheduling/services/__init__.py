"""Scheduling commands: the only writers of scheduling rows."""

from .appointments import (
    AppointmentChange,
    ChangeDone,
    ChangeResult,
    HeldReplace,
    HeldReplacement,
    Rebook,
    StatusChange,
    appointment_book,
    appointment_cancel,
    appointment_move,
    appointment_set_status,
    appointments_apply_changes,
    appointments_replace_held,
)
from .consent import consent_current, consent_record
from .display_names import display_name_set
from .features import feature_enabled, feature_set
from .holds import hold_accept, hold_book, hold_place, hold_release
from .patients import patient_create
from .roles import (
    clinic_grant_decision_feed,
    clinic_grant_operate,
    clinic_grant_role,
)

__all__ = [
    "appointment_book",
    "appointment_cancel",
    "appointment_move",
    "appointment_set_status",
    "appointments_apply_changes",
    "appointments_replace_held",
    "AppointmentChange",
    "ChangeDone",
    "ChangeResult",
    "HeldReplace",
    "HeldReplacement",
    "Rebook",
    "StatusChange",
    "clinic_grant_operate",
    "clinic_grant_decision_feed",
    "clinic_grant_role",
    "consent_current",
    "consent_record",
    "display_name_set",
    "feature_enabled",
    "feature_set",
    "hold_accept",
    "hold_book",
    "hold_place",
    "hold_release",
    "patient_create",
]
