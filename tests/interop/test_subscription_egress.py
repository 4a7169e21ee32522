"""Issue 43: SSRF through FHIR Subscriptions. The endpoint and headers the integration credential sets pass
the egress guard (common/egress.py) or are a typed 400 that writes nothing; an ADMIN's allowlist for the
clinic is how an internal EHR gets in; a failing subscriber is told as "failing since <time> (<class>)",
never by the status code its endpoint answered."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from common import outbox
from common.models import AuditEntry
from interop.models import Subscription, SubscriptionStatus
from interop.services.subscriptions import subscriptions_fanout
from scheduling.models import Role
from tests import factories as f
from tests.conftest import seoul
from tests.interop.ehr import ehr_client
from tests.interop.fhir_helpers import outcome, validated
from tests.support.servers import free_port, http_receiver
from tests.worlds import waitlist_world

pytestmark = pytest.mark.usefixtures("frozen_clock", "no_broker")


@pytest.fixture(autouse=True)
def nothing_allowed(settings):
    """The suite allows its loopback receivers for every clinic (tests/conftest.py); here only an ADMIN's
    allowlist for the clinic does."""
    settings.EGRESS_ALLOWLIST = []


@pytest.fixture
def world(db):
    world = waitlist_world()
    world.ehr = ehr_client(world.clinic)
    return world


def subscribe(world, endpoint, header=("Authorization: Bearer ehr-secret",)):
    body = {"resourceType": "Subscription", "status": "requested", "reason": "EHR sync",
            "criteria": "Appointment?status=booked",
            "channel": {"type": "rest-hook", "endpoint": endpoint, "payload": "application/fhir+json",
                        "header": list(header)}}
    return world.ehr.post(f"/api/v1/clinics/{world.clinic.ref}/fhir/Subscription", data=json.dumps(body),
                          content_type="application/fhir+json")


def allow(world, *entries):
    admin = f.user_with_role(world.clinic, Role.ADMIN, username=f"integration-admin-{len(entries)}")
    args = [f"--allow={entry}" for entry in entries] or ["--clear-allow"]
    call_command("clinic_integration", "set", "--clinic", world.clinic.ref, "--actor-username", admin.username,
                 "--reason", "EHR on the hospital network", *args)
    world.clinic.refresh_from_db()


@pytest.mark.parametrize("endpoint", [
    "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://192.168.1.1/",
    "http://metadata.google.internal/", "http://[::1]:5432/", "http://0.0.0.0:6379/", "http://2130706433/",
    "http://[fd00::1]/", "http://127.0.0.1:9/hook",
])
def test_an_internal_endpoint_is_a_400_and_no_subscription(world, endpoint):
    result = outcome(subscribe(world, endpoint), 400, "invalid")
    assert result.issue[0].details.coding[0].code.startswith("EGRESS_")
    assert "channel.endpoint" in result.issue[0].diagnostics
    assert not Subscription.objects.exists()


@pytest.mark.parametrize("header", ["Cookie: sessionid=x", "Transfer-Encoding: chunked", "Host: 10.0.0.1",
                                    "Connection: close", "Keep-Alive: 5", "Upgrade: websocket"])
def test_a_cookie_framing_or_hop_by_hop_header_is_a_400_and_no_subscription(world, header):
    allow(world, "127.0.0.1/32")
    result = outcome(subscribe(world, "http://127.0.0.1:9/hook", header=[header]), 400, "invalid")
    assert result.issue[0].details.coding[0].code == "HEADER_REFUSED"
    assert not Subscription.objects.exists()


def test_an_admins_allowlist_lets_an_internal_endpoint_in_and_is_audited(world):
    allow(world, "10.0.0.0/8")
    assert validated(subscribe(world, "http://10.20.30.40/fhir/hook"), 201).status == "active"
    entry = AuditEntry.objects.get(action="clinic_integration_set")
    assert entry.result["allowlist"] == ["10.0.0.0/8"] and entry.reason == "EHR on the hospital network"


def test_staff_cannot_set_the_allowlist(world):
    from django.core.management.base import CommandError

    staff = f.user_with_role(world.clinic, Role.STAFF, username="integration-staff")
    with pytest.raises(CommandError, match="PERMISSION_DENIED"):
        call_command("clinic_integration", "set", "--clinic", world.clinic.ref, "--actor-username",
                     staff.username, "--reason", "r", "--allow=10.0.0.0/8")
    world.clinic.refresh_from_db()
    assert "egress_allowlist" not in world.clinic.settings


def deliver():
    return outbox.outbox_deliver_due(worker="test", now=timezone.now() + timedelta(days=1))


def read_back(world):
    subscription = Subscription.objects.get(clinic=world.clinic)
    return subscription, validated(world.ehr.get(
        f"/api/v1/clinics/{world.clinic.ref}/fhir/Subscription/{subscription.ref.replace('_', '.')}"))


@pytest.mark.parametrize("status", [302, 404, 500, 503])
def test_a_failing_subscriber_reads_back_failing_since_and_a_class_never_the_status(world, settings, status):
    settings.FHIR_SUBSCRIPTION_ERROR_AFTER = 1
    allow(world, "127.0.0.1/32")
    with http_receiver([status]) as (url, seen):
        validated(subscribe(world, f"{url}/hook"), 201)
        world.confirmed(seoul(5, 11))
        subscriptions_fanout()
        deliver()
    assert len(seen) == 1
    subscription, read = read_back(world)
    assert subscription.status == SubscriptionStatus.ERROR and read.status == "error"
    assert read.error == f"failing since {timezone.now().isoformat(timespec='seconds').replace('+00:00', 'Z')}" \
                         " (REJECTED)"
    assert str(status) not in re.sub(r"since \S+", "", read.error)


def test_an_unreachable_subscriber_reads_back_unreachable(world, settings):
    settings.FHIR_SUBSCRIPTION_ERROR_AFTER = 1
    allow(world, "127.0.0.1/32")
    validated(subscribe(world, f"http://127.0.0.1:{free_port()}/hook"), 201)  # nothing listens there
    world.confirmed(seoul(5, 11))
    subscriptions_fanout()
    deliver()
    assert read_back(world)[1].error.endswith("(UNREACHABLE)")


def test_an_endpoint_no_longer_allowed_is_blocked_at_the_send(world, settings):
    settings.FHIR_SUBSCRIPTION_ERROR_AFTER = 1
    allow(world, "127.0.0.1/32")
    with http_receiver() as (url, seen):
        validated(subscribe(world, f"{url}/hook"), 201)
        allow(world)  # the ADMIN takes the allowlist away
        world.confirmed(seoul(5, 11))
        subscriptions_fanout()
        deliver()
    assert seen == []
    assert read_back(world)[1].error.endswith("(BLOCKED)")


def test_a_delivered_notification_clears_the_failing_note(world, settings):
    allow(world, "127.0.0.1/32")
    with http_receiver([500]) as (url, seen):
        validated(subscribe(world, f"{url}/hook"), 201)
        world.confirmed(seoul(5, 11))
        subscriptions_fanout()
        deliver()
        assert Subscription.objects.get().error.endswith("(REJECTED)")
        deliver()
    assert len(seen) == 2
    subscription = Subscription.objects.get()
    assert (subscription.error, subscription.failing_since, subscription.consecutive_failures) == ("", None, 0)
