"""Outbound: R4 rest-hook Subscriptions (docs/fhir.md "Subscriptions").

Changes are captured by PostgreSQL triggers (``ResourceChange``, written in the changing transaction by
whatever service changed the row), fanned out by a beat task to the matching subscriptions as outbox
messages (so delivery is after commit, leased, retried with back-off and DEAD after the outbox's bound),
and POSTed, signed, by the outbox handler. A subscriber that keeps failing moves its subscription to
``error``; delivery runs in the outbox worker, never inside dispatch or a claim.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from datetime import UTC
from zoneinfo import ZoneInfo

import urllib3
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.http import QueryDict
from django.utils import timezone
from fhir.resources.R4B.subscription import Subscription as FhirSubscription

from common import egress
from common.errors import NotFound, Unprocessable
from common.outbox import DeliveryFailed, DeliverySkipped
from common.services import audit_record, outbox_enqueue
from scheduling.models import Appointment, Clinic
from waitlist.models import Vacancy

from .. import fhir
from .. import search as s
from ..models import NOTIFICATION_TOPIC as TOPIC
from ..models import ResourceChange, SentState, Subscription, SubscriptionStatus

logger = logging.getLogger(__name__)

FHIR_JSON = "application/fhir+json"
SECRET_EXTENSION = "urn:clinic-waitlist:subscription-signing-secret"


def error_after() -> int:
    """Consecutive failed POSTs after which a subscription is set to ``error`` (and no longer sent)."""
    return getattr(settings, "FHIR_SUBSCRIPTION_ERROR_AFTER", 3)


# --- criteria ---

def _handlers(resource_type: str, slot_status: str = "free") -> dict[str, s.Handler]:
    return fhir.APPOINTMENT_HANDLERS if resource_type == "Appointment" else fhir.slot_handlers(slot_status)


def _criteria(criteria: str) -> tuple[str, QueryDict]:
    resource_type, _, query = criteria.partition("?")
    if resource_type not in ("Appointment", "Slot"):
        raise Unprocessable("criteria must search Appointment or Slot.", fields={"criteria": ["resource type"]})
    return resource_type, QueryDict(query)


def _matches(queryset, subscription: Subscription, zone: ZoneInfo, slot_status: str = "free") -> bool:
    resource_type, params = _criteria(subscription.criteria)
    parsed = s.parse(params, _handlers(resource_type, slot_status), zone=zone, strict=True)
    return queryset.filter(parsed.where).exists()


# --- the resource ---

def to_fhir(subscription: Subscription, *, with_secret: bool = False) -> FhirSubscription:
    channel: dict = {"type": "rest-hook", "endpoint": subscription.endpoint}
    if subscription.payload:
        channel["payload"] = subscription.payload
    if subscription.headers:
        channel["header"] = list(subscription.headers)
    data: dict = {
        "id": fhir.fhir_id(subscription.ref),
        "meta": {"versionId": str(subscription.version),
                 "lastUpdated": subscription.updated_at.isoformat()},
        "status": subscription.status,
        "reason": subscription.reason or "EHR integration",
        "criteria": subscription.criteria,
        "channel": channel,
    }
    if subscription.error:
        data["error"] = subscription.error
    if with_secret:
        data["extension"] = [{"url": SECRET_EXTENSION, "valueString": subscription.secret}]
    return FhirSubscription(**data)


def subscription_create(*, clinic: Clinic, owner, resource: FhirSubscription) -> Subscription:
    """Validate the R4 Subscription (rest-hook, criteria we can evaluate, an endpoint and headers the egress
    guard accepts: ``common.egress``, the clinic's allowlist) and activate it. Audited."""
    channel = resource.channel
    if channel is None or channel.type != "rest-hook":
        raise Unprocessable("Only the rest-hook channel is supported.", fields={"channel.type": ["not supported"]})
    endpoint = str(channel.endpoint or "")
    egress.check_url(endpoint, egress.allowlist_for(clinic.settings), field="channel.endpoint")
    if channel.payload not in (None, FHIR_JSON, "application/json"):
        raise Unprocessable("channel.payload is application/fhir+json or absent.",
                            fields={"channel.payload": ["not supported"]})
    headers = egress.check_header_lines([h for h in channel.header or [] if h is not None], field="channel.header")
    if len(headers) > 10:
        raise egress.HeaderRefused("At most 10 header lines.", fields={"channel.header": ["too many"]})
    criteria = resource.criteria or ""
    if len(criteria) > 500:
        raise Unprocessable("criteria is at most 500 characters.", fields={"criteria": ["length"]})
    resource_type, params = _criteria(criteria)
    s.parse(params, _handlers(resource_type), zone=ZoneInfo(clinic.timezone), strict=True)
    with transaction.atomic():
        subscription = Subscription.objects.create(
            clinic=clinic, owner=owner, resource_type=resource_type, criteria=criteria,
            reason=(resource.reason or "")[:200], endpoint=endpoint, headers=headers,
            payload=FHIR_JSON if channel.payload else "", secret=secrets.token_hex(32),
            status=SubscriptionStatus.ACTIVE)
        audit_record(actor=owner, action="fhir_subscription_create", clinic=clinic, target_ref=subscription.ref,
                     result={"criteria": criteria})
    return subscription


def subscription_get(*, clinic: Clinic, resource_id: str) -> Subscription:
    found = Subscription.objects.filter(clinic=clinic, ref=fhir.ref_of(resource_id)).first()
    if found is None:
        raise NotFound()
    return found


def subscription_delete(*, clinic: Clinic, actor, resource_id: str) -> None:
    with transaction.atomic():
        subscription = subscription_get(clinic=clinic, resource_id=resource_id)
        SentState.objects.filter(subscription=subscription).delete()
        subscription.delete()
        audit_record(actor=actor, action="fhir_subscription_delete", clinic=clinic,
                     target_ref=fhir.ref_of(resource_id))


# --- fan-out: captured changes → outbox messages ---

def _current(clinic: Clinic, kind: str, row_id: int):
    """(resource, signature, queryset of the row, slot status) as the FHIR view shows it now, or None."""
    if kind == "appointment":
        row = fhir.appointment_rows(clinic).filter(pk=row_id).first()
        if row is None:
            return None
        resource = fhir.appointments([row], clinic)[0]
        signature = f"{row['status']}|{row['starts_at'].isoformat()}|{row['practitioner__ref']}"
        return resource, signature, Appointment.objects.filter(pk=row_id), "free"
    row = fhir.vacancy_rows(clinic).filter(pk=row_id).first()
    if row is None:
        return None
    resource, status = fhir.vacancy_slot(clinic, row)
    return resource, status, Vacancy.objects.filter(pk=row_id), status


def _changed(subscription: Subscription, resource_id: str, signature: str) -> bool:
    """Record ``signature`` as told; False when the subscriber was already told exactly this."""
    try:
        with transaction.atomic():
            state, created = SentState.objects.get_or_create(
                subscription=subscription, resource_id=resource_id, defaults={"signature": signature})
    except IntegrityError:
        created = False
    if created:
        return True
    state = SentState.objects.select_for_update(no_key=True).get(subscription=subscription, resource_id=resource_id)
    if state.signature == signature:
        return False
    SentState.objects.filter(pk=state.pk).update(signature=signature)
    return True


def subscriptions_fanout(*, limit: int = 500) -> int:
    """One bounded round: take captured changes (SKIP LOCKED, so rounds may overlap), enqueue one outbox
    message per matching subscription whose subscriber has not been told this state yet, drop the changes.
    Returns the messages enqueued. Changes committed after the round are taken by the next one."""
    enqueued = 0
    with transaction.atomic():
        changes = list(ResourceChange.objects.select_for_update(skip_locked=True, no_key=True).order_by("id")
                       .values_list("id", "clinic_id", "kind", "row_id")[:limit])
        if not changes:
            return 0
        subscriptions: dict[int, list[Subscription]] = {}
        for subscription in Subscription.objects.filter(
                clinic_id__in={c[1] for c in changes}, status=SubscriptionStatus.ACTIVE).select_related(
                "clinic__tenant_group").order_by("pk"):
            subscriptions.setdefault(subscription.clinic_id, []).append(subscription)
        for clinic_id, kind, row_id in dict.fromkeys((c[1], c[2], c[3]) for c in changes):
            wanted = [sub for sub in subscriptions.get(clinic_id, [])
                      if sub.resource_type == ("Appointment" if kind == "appointment" else "Slot")]
            if not wanted:
                continue
            clinic = wanted[0].clinic
            current = _current(clinic, kind, row_id)
            if current is None:
                continue
            resource, signature, queryset, slot_status = current
            zone = ZoneInfo(clinic.timezone)
            for subscription in wanted:
                if not _matches(queryset, subscription, zone, slot_status):
                    continue
                if not _changed(subscription, f"{resource.get_resource_type()}/{resource.id}", signature):
                    continue
                outbox_enqueue(topic=TOPIC, tenant_group_ref=clinic.tenant_group.ref, clinic_ref=clinic.ref,
                               aggregate_ref=subscription.ref, channel="rest-hook",
                               payload={"subscription": subscription.ref,
                                        "resource": json.loads(resource.model_dump_json(exclude_none=True))})
                enqueued += 1
        ResourceChange.objects.filter(id__in=[c[0] for c in changes]).delete()
    return enqueued


# --- delivery (the outbox handler) ---

def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def failing_note(since, failure_class: str) -> str:
    """The subscription's ``error``: when it started failing and a coarse class (``common.egress.failure_class``),
    never the peer's status code: the credential that chose the endpoint reads it (issue 43, a port-scan oracle)."""
    return f"failing since {since.astimezone(UTC).isoformat(timespec='seconds').replace('+00:00', 'Z')} " \
           f"({failure_class})"


def _failed(subscription: Subscription, failure_class: str, code: str) -> None:
    """Count a failed POST and note it (``failing_note``); after ``error_after()`` in a row the subscription is
    set to ``error`` (its ``updated_at`` moves with its version: it is the resource's ``meta.lastUpdated`` and the
    queue's time). ``code``, which may carry the status, goes to the log only."""
    now = timezone.now()
    since = subscription.failing_since or now
    Subscription.objects.filter(pk=subscription.pk, status=SubscriptionStatus.ACTIVE).update(
        consecutive_failures=F("consecutive_failures") + 1, version=F("version") + 1, updated_at=now,
        failing_since=since, error=failing_note(since, failure_class))
    erred = Subscription.objects.filter(pk=subscription.pk, status=SubscriptionStatus.ACTIVE,
                                        consecutive_failures__gte=error_after()).update(
        status=SubscriptionStatus.ERROR, version=F("version") + 1, updated_at=now)
    if erred:
        logger.warning("fhir subscription %s set to error after %s failures class=%s code=%s", subscription.ref,
                       error_after(), failure_class, code)


def deliver_notification(message) -> str:
    """POST the resource to the subscriber, signed (``X-Signature: sha256=<HMAC of the body>``), to the address
    the egress guard checked at this send (``common.egress``: the endpoint's name may resolve elsewhere now).
    The outbox keeps the status code for staff (``HTTP_<status>``); the subscription says only its class."""
    subscription = Subscription.objects.filter(ref=message.payload.get("subscription", "")).select_related(
        "clinic").first()
    if subscription is None or subscription.status != SubscriptionStatus.ACTIVE:
        raise DeliverySkipped("SUBSCRIPTION_INACTIVE")
    body = json.dumps(message.payload["resource"]).encode() if subscription.payload else b""
    headers = egress.safe_headers(subscription.headers)
    headers.update({"Content-Type": FHIR_JSON, "X-Signature": sign(subscription.secret, body),
                    "X-Subscription": fhir.fhir_id(subscription.ref), "X-Notification": message.ref})
    seconds = float(getattr(settings, "FHIR_SUBSCRIPTION_TIMEOUT_SECONDS", 5))
    try:
        target = egress.check_url(subscription.endpoint, egress.allowlist_for(subscription.clinic.settings),
                                  field="endpoint")
        response = egress.post(target, body=body, headers=headers,
                               timeout=urllib3.Timeout(connect=seconds, read=seconds))
    except (egress.EgressRefused, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        failure_class = egress.failure_class(exc)
        code = exc.code if isinstance(exc, egress.EgressRefused) else failure_class
        _failed(subscription, failure_class, code)
        raise DeliveryFailed(code) from None
    if not 200 <= response.status < 300:
        _failed(subscription, egress.failure_class(status=response.status), f"HTTP_{response.status}")
        raise DeliveryFailed(f"HTTP_{response.status}")
    if subscription.consecutive_failures or subscription.failing_since:
        Subscription.objects.filter(pk=subscription.pk).update(consecutive_failures=0, failing_since=None, error="")
    return "rest-hook"
