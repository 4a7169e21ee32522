"""Issue 43: the webhook URL and the egress allowlist are set by an ADMIN through one audited command
(``manage.py clinic_integration``, ``scheduling.services.integration``), checked by the egress guard first."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from common.models import AuditEntry
from scheduling.models import Role
from tests import factories as f


@pytest.fixture(autouse=True)
def nothing_allowed(settings):
    settings.EGRESS_ALLOWLIST = []


def run(clinic, user, *args):
    call_command("clinic_integration", "set", "--clinic", clinic.ref, "--actor-username", user.username,
                 "--reason", "gateway change", *args)


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/sms",
                                 "http://2130706433/", "http://[::1]:6379/"])
def test_an_internal_webhook_url_is_refused_and_nothing_written(clinic, admin, url):
    with pytest.raises(CommandError, match="EGRESS_"):
        run(clinic, admin, "--provider", "webhook", "--webhook-url", url)
    clinic.refresh_from_db()
    assert "notification" not in clinic.settings
    assert not AuditEntry.objects.filter(action="clinic_integration_set").exists()


def test_an_admin_sets_an_allowed_internal_webhook_url_audited(clinic, admin):
    run(clinic, admin, "--provider", "webhook", "--webhook-url", "http://10.0.0.1/sms", "--allow", "10.0.0.0/8")
    clinic.refresh_from_db()
    assert clinic.settings["notification"] == {"provider": "webhook", "webhook_url": "http://10.0.0.1/sms"}
    assert clinic.settings["egress_allowlist"] == ["10.0.0.0/8"]
    entry = AuditEntry.objects.get(action="clinic_integration_set")
    assert entry.reason == "gateway change" and entry.result["webhook_url_set"] is True


def test_staff_cannot_set_the_webhook_url(clinic, staff):
    with pytest.raises(CommandError, match="PERMISSION_DENIED"):
        run(clinic, staff, "--provider", "webhook", "--webhook-url", "https://93.184.216.34/sms")
    clinic.refresh_from_db()
    assert "notification" not in clinic.settings


def test_an_admin_of_another_clinic_is_told_not_found(clinic, other_tenant_clinic):
    stranger = f.user_with_role(other_tenant_clinic, Role.ADMIN, username="stranger-admin")
    with pytest.raises(CommandError, match="NOT_FOUND"):
        run(clinic, stranger, "--allow", "10.0.0.0/8")
