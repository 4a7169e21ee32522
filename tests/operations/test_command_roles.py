"""One rule per command (``scheduling.scoping.COMMAND_ROLES``): the console, the API and the shell agree."""

from __future__ import annotations

import pytest

from operations import views_controls, views_reevaluation, views_waitlist
from scheduling.models import Role
from scheduling.scoping import COMMAND_ROLES, command_role
from waitlist.api import controls as controls_api
from waitlist.api import views as waitlist_api
from waitlist.management.commands.waitlist_recover import ACTIONS

CONSOLE = {
    views_waitlist.waitlist_withdraw: "offer_withdraw",
    views_waitlist.waitlist_redispatch: "vacancy_redispatch",
    views_waitlist.waitlist_retry_booking: "hold_retry_booking",
    views_waitlist.waitlist_review: "vacancy_review_resolve",
    views_reevaluation.reevaluation_preview: "redrive_preview",
    views_reevaluation.reevaluation_execute: "redrive_execute",
    views_reevaluation.reevaluation_mode: "mode_set",
    views_reevaluation.reevaluation_drain: "drain_set",
    views_controls.controls_switch: "waitlist_switch_set",
    views_controls.controls_allowlist: "waitlist_tenant_allow",
    views_controls.controls_policy: "policy_change",
    views_controls.controls_shadow_promote: "shadow_promote",
    views_controls.controls_shadow_discard: "shadow_discard",
}


@pytest.mark.parametrize(("view", "command"), CONSOLE.items(), ids=CONSOLE.values())
def test_each_console_command_needs_its_registered_role(view, command):
    assert view.console_role == command_role(command)


def test_the_api_reads_the_same_roles():
    assert waitlist_api.OfferWithdrawView.required_role == Role.ADMIN == command_role("offer_withdraw")
    assert waitlist_api.VacancyCloseView.required_role == command_role("vacancy_close")
    assert waitlist_api.VacancyReopenView.required_role == command_role("vacancy_reopen")
    assert waitlist_api.HoldRetryBookingView.required_role == command_role("hold_retry_booking")
    assert waitlist_api.VacancyReviewView.required_role == command_role("vacancy_review_resolve")
    for view in (controls_api.WaitlistSwitchView, controls_api.WaitlistAllowlistView, controls_api.WaitlistPolicyView):
        assert view.write_command in COMMAND_ROLES


def test_the_shell_reads_the_same_roles():
    assert set(ACTIONS.values()) <= set(COMMAND_ROLES)
    assert command_role(ACTIONS["withdraw-offer"]) == Role.ADMIN


def test_an_unregistered_command_fails_closed():
    with pytest.raises(KeyError):
        command_role("no_such_command")
