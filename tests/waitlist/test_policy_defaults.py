"""A new clinic's first policy: the defaults that fill well and respect patients (issue 22, part 3)."""

from __future__ import annotations

from datetime import time

from tests import factories as f
from waitlist import services
from waitlist.models import AnswerWindow, SuppressionScope


def test_a_new_clinic_starts_with_quiet_hours_the_lead_time_window_and_standing_acceptance(db, settings):
    settings.WAITLIST_NEW_CLINIC_QUIET_HOURS = "21:00-08:00"
    policy = services.policy_current(clinic=f.ClinicFactory())
    assert (policy.quiet_hours_start, policy.quiet_hours_end) == (time(21), time(8))
    assert policy.answer_window == AnswerWindow.LEAD_TIME and policy.answer_window_margin_minutes == 60
    assert policy.decline_suppression_scope == SuppressionScope.SIMILAR and policy.standing_acceptance


def test_a_clinic_that_names_no_quiet_hours_gets_none(db, settings):
    settings.WAITLIST_NEW_CLINIC_QUIET_HOURS = "21:00-08:00"
    policy = services.policy_current(clinic=f.ClinicFactory(settings={"quiet_hours": {}}))
    assert policy.quiet_hours_start is None and policy.quiet_hours_end is None


def test_a_clinic_that_names_its_own_quiet_hours_keeps_them(db, settings):
    settings.WAITLIST_NEW_CLINIC_QUIET_HOURS = "21:00-08:00"
    clinic = f.ClinicFactory(settings={"quiet_hours": {"start": "20:00", "end": "09:00"}})
    policy = services.policy_current(clinic=clinic)
    assert (policy.quiet_hours_start, policy.quiet_hours_end) == (time(20), time(9))
