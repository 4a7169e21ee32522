"""The Action queue also holds what fails outside a vacancy (issue 25 section 1, issue 24 section 3): an EHR
subscription set to ``error``, a clinic's failing notice provider, an undelivered booking confirmation, each
with its reason in words and what to do."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from common import outbox
from common.models import DeliveryOutcome, OutboxMessage, OutboxStatus
from interop.models import Subscription, SubscriptionStatus
from interop.services.subscriptions import subscriptions_fanout
from tests.conftest import seoul
from tests.interop.ehr import ehr_client
from tests.operations.waitlist_helpers import make_offer
from tests.support.servers import http_receiver
from waitlist.figures.queue import ops_action_queue
from waitlist.notices.confirmation_services import BOOKING_CONFIRMED_TOPIC

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]


def _deliver():
    return outbox.outbox_deliver_due(worker="test", now=timezone.now() + timedelta(days=1))


def _row(html: str, kind: str) -> str:
    found = re.search(rf'<tr data-queue-ref="[^"]*" data-kind="{kind}".*?</tr>', html, re.S)
    assert found is not None, f"no {kind} row"
    return re.sub(r"\s+", " ", found.group(0))


def _page(web, clinic) -> str:
    return web.get(reverse("console:waitlist", kwargs={"clinic_ref": clinic.ref})).content.decode()


def _subscribe(world, url: str) -> None:
    body = {"resourceType": "Subscription", "status": "requested", "reason": "EHR sync",
            "criteria": "Appointment?status=booked",
            "channel": {"type": "rest-hook", "endpoint": f"{url}/hook", "payload": "application/fhir+json"}}
    response = ehr_client(world.clinic).post(f"/api/v1/clinics/{world.clinic.ref}/fhir/Subscription",
                                             data=json.dumps(body), content_type="application/fhir+json")
    assert response.status_code == 201


def test_a_subscription_in_error_is_in_the_queue_with_its_code_and_what_to_do(staff_web, world, settings):
    settings.OUTBOX_MAX_ATTEMPTS = 3
    settings.FHIR_SUBSCRIPTION_ERROR_AFTER = 3
    with http_receiver([500, 500, 500]) as (url, _seen):
        _subscribe(world, url)
        world.confirmed(seoul(5, 11))
        subscriptions_fanout()
        for _ in range(3):
            assert _deliver() == {"FAILED": 1}
    items = [i for i in ops_action_queue(clinic=world.clinic)["items"] if i["kind"] == "SUBSCRIPTION_ERROR"]
    assert len(items) == 1
    item = items[0]
    assert (item["reason_code"], item["failures"], item["criteria"]) == ("HTTP_500", 3, "Appointment?status=booked")
    row = _row(_page(staff_web, world.clinic), "SUBSCRIPTION_ERROR")
    assert "EHR not told" in row and "Endpoint answered 500" in row
    assert "What to do:" in row and "/admin/common/outboxmessage/?topic=fhir.subscription" in row
    assert url not in row  # the integrator's endpoint is not shown


def test_an_active_subscription_is_not_in_the_queue(world):
    with http_receiver([]) as (url, _seen):
        _subscribe(world, url)
    assert Subscription.objects.get(clinic=world.clinic).status == SubscriptionStatus.ACTIVE
    assert "SUBSCRIPTION_ERROR" not in [i["kind"] for i in ops_action_queue(clinic=world.clinic)["items"]]


def test_a_failing_notice_provider_is_in_the_queue_until_a_notice_goes_out(staff_web, world, settings, frozen_clock):
    settings.OUTBOX_MAX_ATTEMPTS = 5
    settings.WAITLIST_PROVIDER_FAILING_AFTER = 3
    settings.WAITLIST_READINESS_CACHE_SECONDS = 0  # the streak is read on every load (else kept a few seconds)
    with http_receiver([503, 503, 503, 200]) as (url, _seen):
        world.clinic.settings = {"notification": {"provider": "webhook", "webhook_url": url}}
        world.clinic.save(update_fields=["settings"])
        make_offer(world, world.patient(phone="+821000000000"))
        for attempt in range(3):
            kinds = [i["kind"] for i in ops_action_queue(clinic=world.clinic)["items"]]
            assert "PROVIDER_FAILING" not in kinds, attempt
            assert _deliver() == {DeliveryOutcome.FAILED: 1}
        item = next(i for i in ops_action_queue(clinic=world.clinic)["items"] if i["kind"] == "PROVIDER_FAILING")
        assert (item["ref"], item["reason_code"], item["attempts"], item["last_sent_at"]) == (
            "webhook", "WEBHOOK_UNAVAILABLE", 3, None)
        row = _row(_page(staff_web, world.clinic), "PROVIDER_FAILING")
        assert "Notices failing" in row and "Gateway unavailable" in row and "What to do:" in row
        assert reverse("admin:scheduling_clinic_change", args=[world.clinic.pk]) in row
        assert _deliver() == {DeliveryOutcome.SENT: 1}
    assert "PROVIDER_FAILING" not in [i["kind"] for i in ops_action_queue(clinic=world.clinic)["items"]]


def test_an_undelivered_booking_confirmation_is_a_dead_delivery_naming_its_appointment(world):
    appointment = world.confirmed(seoul(5, 11))
    message = OutboxMessage.objects.create(
        topic=BOOKING_CONFIRMED_TOPIC, tenant_group_ref=world.clinic.tenant_group.ref, clinic_ref=world.clinic.ref,
        aggregate_ref=appointment.ref, status=OutboxStatus.DEAD, last_error_code="SMTP_UNAVAILABLE", attempts=5)
    item = next(i for i in ops_action_queue(clinic=world.clinic)["items"] if i["kind"] == "DELIVERY_DEAD")
    assert (item["ref"], item["appointment"], item["notice"], item["reason_code"]) == (
        message.ref, appointment.ref, BOOKING_CONFIRMED_TOPIC, "SMTP_UNAVAILABLE")
    assert "offer" not in item


def test_the_provider_failures_gauge_counts_the_failed_attempts_in_a_row(world, settings):
    from observability.metrics import Scope, domain_samples

    settings.OUTBOX_MAX_ATTEMPTS = 5
    with http_receiver([503, 503]) as (url, _seen):
        world.clinic.settings = {"notification": {"provider": "webhook", "webhook_url": url}}
        world.clinic.save(update_fields=["settings"])
        make_offer(world, world.patient(phone="+821000000000"))
        _deliver()
        _deliver()
        samples = dict(domain_samples(Scope("*"))["waitlist_notice_provider_failures"])
        assert samples[(world.clinic.tenant_group.ref, world.clinic.ref)] == 2
        _deliver()
        samples = dict(domain_samples(Scope("*"))["waitlist_notice_provider_failures"])
        assert samples[(world.clinic.tenant_group.ref, world.clinic.ref)] == 0
