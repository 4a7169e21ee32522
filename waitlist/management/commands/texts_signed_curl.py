"""Print a ``curl`` that posts a text to the inbound webhook as Twilio would, signed with ``TWILIO_AUTH_TOKEN``:
``manage.py texts_signed_curl --from +82105550001 --body "YES 4821"``, or ``--reply YES`` to answer the newest
text as its patient. Computing Twilio's signature by hand (an
HMAC-SHA1 over the URL and the sorted form fields) is not copy-paste friendly; the demo and support use this.
"""

from __future__ import annotations

import secrets
import shlex

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from twilio.request_validator import RequestValidator

from common.notify import twilio_webhook_url
from waitlist.models import TextMessage


class Command(BaseCommand):
    help = "Print a curl posting a signed text (or, with --status, a delivery receipt) to Twilio's webhooks here."

    def add_arguments(self, parser):
        parser.add_argument("--reply", default="", help="answer the newest text (or --text) with this word, e.g. YES: "
                            "its patient's number and its code are filled in")
        parser.add_argument("--text", default="", help="with --reply: the text's ref (txt_…) instead of the newest")
        parser.add_argument("--from", dest="sender", help="the patient's number in E.164, e.g. +82105550001")
        parser.add_argument("--body", default="YES", help='the text, e.g. "YES 4821"')
        parser.add_argument("--sid", default="", help="the message id (default: a new one; repeat it to replay)")
        parser.add_argument("--status", default="", help="post a receipt instead: queued, sent, delivered, failed …")
        parser.add_argument("--error-code", default="", help="with --status failed/undelivered, e.g. 30003")

    def handle(self, *args, sender=None, body="YES", sid="", status="", error_code="", reply="", text="",
               **options):
        if reply:
            texts = TextMessage.objects.select_related("patient").order_by("-id")
            found = texts.filter(ref=text).first() if text else texts.first()
            if found is None:
                raise CommandError("no such text")
            sender, body = found.patient.phone, f"{reply} {found.reply_code}"
        if not settings.TWILIO_AUTH_TOKEN:
            raise CommandError("TWILIO_AUTH_TOKEN is not set: the webhook would refuse every request (403)")
        if status:
            if not sid:
                raise CommandError("--status needs --sid (the text's MessageSid)")
            name, params = "status", {"MessageSid": sid, "MessageStatus": status}
            if error_code:
                params["ErrorCode"] = error_code
        else:
            if not sender:
                raise CommandError("--from is required")
            name = "inbound"
            params = {"MessageSid": sid or f"SM{secrets.token_hex(16)}", "From": sender,
                      "To": settings.TWILIO_FROM or "+15005550006", "Body": body}
        url = twilio_webhook_url(name)
        signature = RequestValidator(settings.TWILIO_AUTH_TOKEN).compute_signature(url, params)
        fields = " ".join(f"--data-urlencode {shlex.quote(f'{k}={v}')}" for k, v in params.items())
        self.stdout.write(f"curl -s -H {shlex.quote('X-Twilio-Signature: ' + signature)} {fields} {shlex.quote(url)}")
