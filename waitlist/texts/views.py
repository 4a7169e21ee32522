"""Twilio's webhooks (inbound texts, delivery receipts) and a text's short link. Thin: check, then a service.

Each webhook checks Twilio's request signature (``X-Twilio-Signature``, with the library's ``RequestValidator``
over the public URL Twilio posted to, ``common.notify.twilio_webhook_url``): a missing or bad one is 403 and
nothing is read further. Inbound texts are limited per sender number (``TEXT_INBOUND_RATE``).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from twilio.request_validator import RequestValidator
from twilio.twiml.messaging_response import MessagingResponse

from common.notify import twilio_webhook_url
from common.throttling import window_over
from waitlist.offers.tokens import claim_link
from waitlist.texts.models import AckVia, TextKind, TextMessage
from waitlist.texts.services.acknowledgement import acknowledgement_record
from waitlist.texts.services.receipts import text_status_record
from waitlist.texts.services.replies import text_reply_receive
from waitlist.texts.services.send import link_digest

logger = logging.getLogger("waitlist")


def signature_valid(request: HttpRequest, name: str) -> bool:
    """Twilio's signature of this request over its public URL (and query string) and its form fields."""
    token = settings.TWILIO_AUTH_TOKEN
    signature = request.headers.get("X-Twilio-Signature", "")
    if not token or not signature:
        return False
    url = twilio_webhook_url(name)
    if request.META.get("QUERY_STRING"):
        url += "?" + request.META["QUERY_STRING"]
    return RequestValidator(token).validate(url, request.POST, signature)


def _twiml(answer: str) -> HttpResponse:
    reply = MessagingResponse()
    if answer:
        reply.message(answer)
    return HttpResponse(str(reply), content_type="application/xml")


@csrf_exempt
@require_POST
def inbound(request: HttpRequest) -> HttpResponse:
    """A patient's text: answered with TwiML (Twilio sends the ``<Message>`` back to the sender)."""
    if not signature_valid(request, "inbound"):
        return HttpResponseForbidden()
    sid, sender = request.POST.get("MessageSid", ""), request.POST.get("From", "")
    if not sid:
        return HttpResponse(status=400)
    if window_over("text-inbound", sender, settings.TEXT_INBOUND_RATE):
        return HttpResponse(status=429)
    answer = text_reply_receive(sid=sid[:64], sender=sender[:20], body=request.POST.get("Body", "")[:1600],
                                now=timezone.now())
    return _twiml(answer)


@csrf_exempt
@require_POST
def status(request: HttpRequest) -> HttpResponse:
    """A delivery receipt: ``MessageSid``, ``MessageStatus`` and (failed) ``ErrorCode``."""
    if not signature_valid(request, "status"):
        return HttpResponseForbidden()
    text_status_record(sid=request.POST.get("MessageSid", "")[:64], status=request.POST.get("MessageStatus", ""),
                       error_code=request.POST.get("ErrorCode", ""), now=timezone.now())
    return HttpResponse(status=204)


@never_cache
@require_GET
def short_link(request: HttpRequest, code: str) -> HttpResponse:
    """``/c/<code>``: the text's offer's claim page (a fresh signed link); 404 for a code that is not one."""
    text = (TextMessage.objects.select_related("offer__entry").filter(link_digest=link_digest(code[:64]))
            .exclude(offer=None).first())
    if text is None or text.offer is None:
        return HttpResponse("Not found.", status=404, content_type="text/plain")
    if text.kind == TextKind.BOOKED:
        acknowledgement_record(offer_id=text.offer.pk, via=AckVia.LINK)
    return redirect(claim_link(text.offer))
