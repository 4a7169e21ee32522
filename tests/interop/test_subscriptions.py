"""Outbound: R4 rest-hook Subscriptions of the integration credential; captured changes fanned out to the
outbox once per state, POSTed signed to a loopback subscriber, retried, DEAD after the bound; a subscriber
that keeps failing is set to ``error``. Every body (ours and the notification's) is validated as FHIR."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from fhir.resources.R4B.appointment import Appointment as FhirAppointment

from common import outbox
from common.models import AuditEntry, OutboxMessage, OutboxStatus
from interop.fhir import fhir_id
from interop.models import Subscription, SubscriptionStatus
from interop.services.subscriptions import SECRET_EXTENSION, TOPIC, subscriptions_fanout
from scheduling.models import AppointmentStatus
from scheduling.services import appointment_book, appointment_set_status
from tests.conftest import race, seoul, token_client
from tests.interop.ehr import ehr_client
from tests.interop.fhir_helpers import entries, outcome, validated
from tests.support.servers import http_receiver
from tests.worlds import waitlist_world

pytestmark = pytest.mark.usefixtures("frozen_clock", "no_broker")


@pytest.fixture
def world(db):
    world = waitlist_world()
    world.ehr = ehr_client(world.clinic)
    return world


def subscribe(world, criteria="Appointment?status=booked", endpoint="http://127.0.0.1:9/hook", client=None,
              **channel):
    body = {"resourceType": "Subscription", "status": "requested", "reason": "EHR sync", "criteria": criteria,
            "channel": {"type": "rest-hook", "endpoint": endpoint, "payload": "application/fhir+json",
                        "header": ["Authorization: Bearer ehr-secret"], **channel}}
    return (client or world.ehr).post(f"/api/v1/clinics/{world.clinic.ref}/fhir/Subscription",
                                      data=json.dumps(body), content_type="application/fhir+json")


def deliver(**kw):
    return outbox.outbox_deliver_due(worker="test", now=timezone.now() + timedelta(days=1), **kw)


def test_the_credential_creates_an_active_rest_hook_subscription_with_its_signing_secret(world):
    created = validated(subscribe(world), 201)
    assert created.status == "active" and created.channel.type == "rest-hook"
    assert created.extension[0].url == SECRET_EXTENSION and len(created.extension[0].valueString) == 64
    row = Subscription.objects.get(clinic=world.clinic)
    assert row.criteria == "Appointment?status=booked"
    assert AuditEntry.objects.filter(action="fhir_subscription_create", target_ref=row.ref).exists()


def test_a_subscription_reads_lists_and_deletes(world):
    created = validated(subscribe(world), 201)
    base = f"/api/v1/clinics/{world.clinic.ref}/fhir/Subscription"
    read = validated(world.ehr.get(f"{base}/{created.id}"))
    assert read.criteria == created.criteria and read.extension is None  # the secret is told once
    assert [s.id for s in entries(world.ehr.get(base), type(read))] == [created.id]
    assert world.ehr.delete(f"{base}/{created.id}").status_code == 204
    outcome(world.ehr.get(f"{base}/{created.id}"), 404, "not-found")


def test_staff_cannot_manage_subscriptions(world):
    outcome(subscribe(world, client=token_client(world.staff)), 403, "forbidden")
    outcome(token_client(world.staff).get(f"/api/v1/clinics/{world.clinic.ref}/fhir/Subscription"), 403,
            "forbidden")


@pytest.mark.parametrize("criteria, status, code", [
    ("Patient?name=x", 422, "processing"),
    ("Appointment?colour=blue", 400, "not-supported"),
    ("Slot?start=ge9999-12-31T23:59:59-05:00", 400, "invalid"),
])
def test_criteria_the_server_cannot_evaluate_are_refused(world, criteria, status, code):
    outcome(subscribe(world, criteria=criteria), status, code)
    assert not Subscription.objects.exists()


def test_a_channel_the_server_cannot_use_is_refused(world):
    outcome(subscribe(world, type="websocket"), 422, "processing")


@pytest.mark.parametrize("channel", [{"endpoint": "ftp://x/"}, {"header": ["X-Signature: forged"]}])
def test_an_endpoint_or_header_the_egress_guard_refuses_is_a_400(world, channel):
    outcome(subscribe(world, **channel), 400, "invalid")
    assert not Subscription.objects.exists()


def test_a_matching_change_is_enqueued_once_per_state(world):
    validated(subscribe(world), 201)
    proposed = appointment_book(clinic=world.clinic, patient=world.patient(), practitioner=world.doctor,
                                treatment=world.treatment, starts_at=seoul(5, 11), status=AppointmentStatus.PROPOSED)
    assert subscriptions_fanout() == 0  # proposed: outside the criteria
    appointment_set_status(clinic=world.clinic, appointment_ref=proposed.ref, target=AppointmentStatus.CONFIRMED)
    world.confirmed(seoul(6, 11))
    assert subscriptions_fanout() == 2
    assert subscriptions_fanout() == 0  # nothing new
    messages = OutboxMessage.objects.filter(topic=TOPIC)
    assert messages.count() == 2
    bodies = [FhirAppointment.model_validate(m.payload["resource"]) for m in messages]
    assert {b.status for b in bodies} == {"booked"}
    assert fhir_id(proposed.ref) in {b.id for b in bodies}


def test_a_change_outside_the_criteria_is_not_enqueued(world):
    validated(subscribe(world), 201)
    appointment_book(clinic=world.clinic, patient=world.patient(), practitioner=world.doctor,
                     treatment=world.treatment, starts_at=seoul(5, 11), status=AppointmentStatus.PROPOSED)
    assert subscriptions_fanout() == 0


def test_a_notification_is_posted_signed_with_the_subscribers_header(world):
    with http_receiver() as (url, seen):
        created = validated(subscribe(world, endpoint=f"{url}/hook"), 201)
        secret = created.extension[0].valueString
        world.confirmed(seoul(5, 11))
        subscriptions_fanout()
        assert deliver() == {"SENT": 1}
    request = seen[0]
    assert request["headers"]["Authorization"] == "Bearer ehr-secret"
    assert request["headers"]["Content-Type"] == "application/fhir+json"
    expected = "sha256=" + hmac.new(secret.encode(), request["body"], hashlib.sha256).hexdigest()
    assert request["headers"]["X-Signature"] == expected
    assert FhirAppointment.model_validate_json(request["body"]).status == "booked"


def test_a_failing_subscriber_is_retried_dead_after_the_bound_and_the_subscription_set_to_error(world, settings):
    settings.OUTBOX_MAX_ATTEMPTS = 3
    settings.FHIR_SUBSCRIPTION_ERROR_AFTER = 3
    with http_receiver([500, 500, 500]) as (url, seen):
        validated(subscribe(world, endpoint=f"{url}/hook"), 201)
        world.confirmed(seoul(5, 11))
        subscriptions_fanout()
        for _ in range(3):
            assert deliver() == {"FAILED": 1}
        assert deliver() == {}
    message = OutboxMessage.objects.get(topic=TOPIC)
    assert (message.status, message.attempts, message.last_error_code) == (OutboxStatus.DEAD, 3, "HTTP_500")
    assert len(seen) == 3
    subscription = Subscription.objects.get(clinic=world.clinic)
    assert subscription.status == SubscriptionStatus.ERROR and subscription.error.endswith("(REJECTED)")
    read = validated(world.ehr.get(f"/api/v1/clinics/{world.clinic.ref}/fhir/Subscription/"
                                   f"{subscription.ref.replace('_', '.')}"))
    assert read.status == "error" and read.error


def test_a_subscription_in_error_is_no_longer_fanned_out_or_sent(world):
    validated(subscribe(world), 201)
    Subscription.objects.update(status=SubscriptionStatus.ERROR)
    world.confirmed(seoul(5, 11))
    assert subscriptions_fanout() == 0


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_two_overlapping_fanout_rounds_enqueue_each_change_once():
    world = waitlist_world()
    world.ehr = ehr_client(world.clinic)
    validated(subscribe(world), 201)
    for day in range(2, 8):
        world.confirmed(seoul(day, 11))
    counts = race(lambda i: subscriptions_fanout(limit=3), 2)
    assert sum(counts) + subscriptions_fanout() == 6
    assert OutboxMessage.objects.filter(topic=TOPIC).count() == 6
    assert subscriptions_fanout() == 0


def test_subscription_health_is_in_metrics_by_status_with_the_oldest_undelivered_age(world, settings, frozen_clock):
    from observability.metrics import GAUGES, Scope, domain_samples

    settings.OUTBOX_MAX_ATTEMPTS = 3
    settings.FHIR_SUBSCRIPTION_ERROR_AFTER = 3
    labels = (world.clinic.tenant_group.ref, world.clinic.ref)

    def value(name, **extra):
        wanted = dict(zip(("tenant_group", "clinic"), labels, strict=True)) | extra
        return next(v for values, v in domain_samples(Scope("*"))[name]
                    if dict(zip(GAUGES[name][1], values, strict=True)) == wanted)

    with http_receiver([500, 500, 500]) as (url, _seen):
        validated(subscribe(world, endpoint=f"{url}/hook"), 201)
        world.confirmed(seoul(5, 11))
        subscriptions_fanout()
        frozen_clock.shift(timedelta(minutes=10))
        assert value("fhir_subscriptions", status="active") == 1
        assert value("fhir_notifications_undelivered") == 1
        assert value("fhir_notification_oldest_undelivered_age_seconds") == 600
        for _ in range(3):
            deliver()
    assert value("fhir_subscriptions", status="error") == 1
    assert value("fhir_subscriptions", status="active") == 0
    assert value("fhir_notifications_dead") == 1
    assert value("fhir_notification_oldest_undelivered_age_seconds") == 0
