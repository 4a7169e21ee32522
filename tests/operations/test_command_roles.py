"""One rule per command (``scheduling.scoping.COMMAND_ROLES``): the console, the API and the shell agree.

The tests enumerate every routed view, so a new write view that names no registered command fails here
before anyone has to remember to list it. What each command needs is written out here (``EXPECTED_ROLES``),
never read from the table under test: a wrong entry there fails (issue 43).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.views import APIView

from common.api import ClinicAPIView
from scheduling.models import Role
from scheduling.scoping import COMMAND_ROLES, command_role, may_run
from waitlist.management.commands.waitlist_recover import ACTIONS

SAFE = {"GET", "HEAD", "OPTIONS"}
ADMIN, STAFF = Role.ADMIN, Role.STAFF

#: The role every command needs, written out (docs/security.md "Roles"): ADMIN for what ends a patient's chance,
#: moves the rollout or policy, redrives or changes reevaluation, or points the clinic's integration elsewhere;
#: STAFF for front-desk work.
EXPECTED_ROLES: dict[str, Role] = {
    "offer_withdraw": ADMIN, "offer_decline": ADMIN, "vacancy_close": ADMIN, "vacancy_reopen": ADMIN,
    "vacancy_redispatch": STAFF, "hold_retry_booking": STAFF, "vacancy_review_resolve": STAFF,
    "entry_create": STAFF, "entry_set_priority": ADMIN, "entry_withdraw": STAFF,
    "standing_acceptance_record": STAFF, "standing_release": STAFF, "offer_claim": STAFF,
    "offer_late_accept": STAFF, "hold_book": STAFF, "vacancy_dispatch": STAFF,
    "patient_create": STAFF, "consent_record": STAFF, "appointment_book": STAFF, "appointment_cancel": STAFF,
    "clinic_integration_set": ADMIN,
    "waitlist_switch_set": ADMIN, "waitlist_tenant_allow": ADMIN, "policy_change": ADMIN,
    "shadow_publish": ADMIN, "shadow_promote": ADMIN, "shadow_discard": ADMIN,
    "redrive_preview": STAFF, "redrive_execute": ADMIN, "mode_set": ADMIN, "drain_set": ADMIN,
    "due_override_set": ADMIN, "proposal_confirm": STAFF, "proposal_reject": STAFF,
    "join_settings_set": ADMIN, "join_request_approve": STAFF, "join_request_reject": STAFF, "entry_resume": STAFF,
}

#: Every API view that writes, by class name: the command it runs (its role is that command's), or why it names
#: none. A write view missing here fails ``test_every_api_write_view_is_listed``.
API_COMMANDS: dict[str, str] = {
    "PatientCreateView": "patient_create",
    "PatientConsentView": "consent_record",
    "AppointmentCreateView": "appointment_book",
    "AppointmentCancelView": "appointment_cancel",
    "EntryCreateView": "entry_create",
    "EntryPriorityView": "entry_set_priority",
    "EntryStandingAcceptanceView": "standing_acceptance_record",
    "EntryWithdrawView": "entry_withdraw",
    "VacancyDispatchView": "vacancy_dispatch",
    "OfferClaimView": "offer_claim",
    "OfferLateAcceptView": "offer_late_accept",
    "OfferDeclineView": "offer_decline",
    "OfferWithdrawView": "offer_withdraw",
    "OfferReleaseView": "standing_release",
    "HoldBookView": "hold_book",
    "VacancyCloseView": "vacancy_close",
    "VacancyReopenView": "vacancy_reopen",
    "VacancyReviewView": "vacancy_review_resolve",
    "HoldRetryBookingView": "hold_retry_booking",
    "ShadowPolicyView": "shadow_publish",
    "ShadowDecideView:promote": "shadow_promote",
    "ShadowDecideView:discard": "shadow_discard",
    "WaitlistSwitchView": "waitlist_switch_set",
    "WaitlistAllowlistView": "waitlist_tenant_allow",
    "WaitlistPolicyView": "policy_change",
    "ReevaluationDrainView": "drain_set",
    "ProfileReevaluationOpsView:PREVIEW": "redrive_preview",
    "ProfileReevaluationOpsView:EXECUTE": "redrive_execute",
    "ProposalConfirmView": "proposal_confirm",
    "ProposalRejectView": "proposal_reject",
    "JoinSettingsView": "join_settings_set",
    "JoinDecisionView:approve": "join_request_approve",
    "JoinDecisionView:reject": "join_request_reject",
    "EntryResumeView": "entry_resume",
}
#: Write views gated by something other than a role, and by what.
API_NOT_ROLE_GATED = {
    "DecisionFeedView": "the clinic's integration credential (``clinic_for_grant``, ``feed_decisions``)",
    "EventIntakeView": "a signed event (the issuer's key), no user at all",
    # FHIR (interop.api.FhirView): the EHR integration credential (``scheduling.fhir_integration``), not a role.
    "AppointmentSearchView": "the FHIR integration credential (an Appointment create)",
    "SubscriptionView": "the FHIR integration credential",
    "SubscriptionReadView": "the FHIR integration credential",
    "UnknownView": "answers every method with a FHIR OperationOutcome; changes nothing",
    # The public join contract (waitlist.joining.api): anyone, limited per address, contact and clinic; nothing
    # but the request row is written before the code sent to the contact comes back.
    "JoinRequestCreateView": "no user: the public join contract (limits, CAPTCHA hook, one-time code)",
    "JoinRequestVerifyView": "no user: the one-time code sent to the request's contact",
    "JoinRequestResendView": "no user: the request's own send limit",
}


def _patterns(resolver=None):
    for pattern in (resolver or get_resolver()).url_patterns:
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern)
        elif isinstance(pattern, URLPattern):
            yield pattern


def _api_write_views():
    """(key, view instance) of every routed API view class with a write method; a view routed twice with
    different arguments (``decision``) or choosing its command by the body (``action``) is one key per command."""
    seen = {}
    for pattern in _patterns():
        cls = getattr(pattern.callback, "view_class", None)
        writes = cls is not None and any(hasattr(cls, m) for m in ("post", "put", "patch", "delete"))
        if not writes or not issubclass(cls, APIView):
            continue
        initkwargs = getattr(pattern.callback, "view_initkwargs", {}) or {}
        key = cls.__name__ + (f":{initkwargs['decision']}" if "decision" in initkwargs else "")
        if cls.__name__ == "ProfileReevaluationOpsView":
            for action in ("PREVIEW", "EXECUTE"):
                seen[f"{key}:{action}"] = (cls(**initkwargs), {"action": action})
        else:
            seen[key] = (cls(**initkwargs), {})
    return seen


def _console_write_views():
    return {
        pattern.callback.__name__: pattern.callback
        for pattern in _patterns()
        if hasattr(pattern.callback, "console_methods") and not set(pattern.callback.console_methods) <= SAFE
    }


def test_the_registry_is_exactly_the_roles_written_here():
    assert dict(COMMAND_ROLES) == EXPECTED_ROLES
    assert all(isinstance(role, Role) for role in COMMAND_ROLES.values())
    assert set(API_COMMANDS.values()) <= set(EXPECTED_ROLES)


@pytest.mark.parametrize("command", sorted(EXPECTED_ROLES))
def test_command_role_answers_the_role_written_here(command):
    assert command_role(command) == EXPECTED_ROLES[command]


def test_every_api_write_view_is_listed():
    views = _api_write_views()
    assert set(views) == set(API_COMMANDS) | set(API_NOT_ROLE_GATED)


@pytest.mark.parametrize("key", sorted(API_COMMANDS))
def test_each_api_write_needs_its_commands_role(key):
    view, data = _api_write_views()[key]
    if not isinstance(view, ClinicAPIView):
        pytest.fail(f"{key} is not a ClinicAPIView")
    request = SimpleNamespace(method="POST", data=data)
    assert view.role_for(request) == EXPECTED_ROLES[API_COMMANDS[key]]


def test_every_console_write_view_names_its_command():
    views = _console_write_views()
    assert views, "the console routes write views"
    for name, view in views.items():
        assert view.console_command in EXPECTED_ROLES, name
        assert view.console_role == EXPECTED_ROLES[view.console_command], name


def test_the_console_runs_the_commands_the_api_runs_under_the_same_roles():
    console = {view.console_command for view in _console_write_views().values()}
    assert {"offer_withdraw", "vacancy_redispatch", "hold_retry_booking", "vacancy_review_resolve",
            "redrive_preview", "redrive_execute", "mode_set", "drain_set", "waitlist_switch_set",
            "waitlist_tenant_allow", "policy_change", "shadow_promote", "shadow_discard", "proposal_confirm",
            "proposal_reject", "appointment_cancel", "entry_create", "offer_claim", "offer_late_accept",
            "offer_decline", "standing_acceptance_record", "standing_release"} == console


def test_the_shell_reads_the_same_roles():
    assert set(ACTIONS.values()) <= set(EXPECTED_ROLES)
    assert {action: command_role(command) for action, command in ACTIONS.items()} == {
        action: EXPECTED_ROLES[command] for action, command in ACTIONS.items()}
    assert command_role(ACTIONS["withdraw-offer"]) == Role.ADMIN


def test_an_unregistered_command_fails_closed():
    with pytest.raises(KeyError):
        command_role("no_such_command")
    with pytest.raises(KeyError):
        may_run(SimpleNamespace(is_authenticated=True, pk=1), SimpleNamespace(pk=1), "no_such_command")


@pytest.mark.django_db
def test_may_run_is_the_role_of_the_command(clinic, staff, admin, outsider):
    from scheduling.scoping import clinic_for_user

    for command, role in EXPECTED_ROLES.items():
        assert may_run(admin, clinic, command)
        assert may_run(staff, clinic, command) == (role == Role.STAFF), command
        assert not may_run(outsider, clinic, command)
    # A clinic resolved for a user carries their role: no query, and not trusted for another user.
    resolved = clinic_for_user(staff, clinic.ref)
    assert not may_run(staff, resolved, "entry_set_priority")
    assert may_run(admin, resolved, "entry_set_priority")
