"""The texts sent and received. Imported by ``waitlist.models`` (Django finds the models there).

No text body is stored, sent or received: a sent text is its refs, reply code, short link's digest and delivery
state; a received one is its provider id, the parsed word and code, and what it did.
"""

from __future__ import annotations

from django.db import models

from common.refs import RefField


class TextKind(models.TextChoices):
    OFFER = "OFFER"  # a time opened up: reply YES/NO
    BOOKED = "BOOKED"  # you are booked (a claim's confirmation, or an automatic booking)


class TextStatus(models.TextChoices):
    """The provider's delivery states (Twilio's ``MessageStatus``, upper-cased), after PENDING (written, not yet
    taken by the provider)."""

    PENDING = "PENDING"
    QUEUED = "QUEUED"
    SENT = "SENT"
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"
    UNDELIVERED = "UNDELIVERED"


_ENDS = {TextStatus.DELIVERED, TextStatus.FAILED, TextStatus.UNDELIVERED}
#: A receipt moves a text forward only: a late "sent" never overwrites "delivered" or "failed", and a text ends
#: once (so it falls back to e-mail once).
TEXT_TRANSITIONS: dict[str, set[str]] = {
    TextStatus.PENDING: {TextStatus.QUEUED, TextStatus.SENT, *_ENDS},
    TextStatus.QUEUED: {TextStatus.SENT, *_ENDS},
    TextStatus.SENT: set(_ENDS),
    TextStatus.DELIVERED: set(),
    TextStatus.FAILED: set(),
    TextStatus.UNDELIVERED: set(),
}
FAILED_STATUSES = (TextStatus.FAILED, TextStatus.UNDELIVERED)


class TextMessage(models.Model):
    """One text of one outbox notice (``outbox_ref``; a retried send reuses it)."""

    #: The table ``common.cas`` checks every status write against.
    STATE_MACHINE = ("status", TEXT_TRANSITIONS)

    ref = RefField(prefix="txt")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    patient = models.ForeignKey("scheduling.Patient", on_delete=models.PROTECT, related_name="+")
    offer = models.ForeignKey("waitlist.Offer", on_delete=models.PROTECT, related_name="+", null=True)
    kind = models.CharField(max_length=8, choices=TextKind.choices)
    outbox_ref = models.CharField(max_length=40, unique=True, help_text="the notice this text carries")
    reply_code = models.CharField(max_length=4, help_text="4 digits naming this text in a reply")
    link_digest = models.CharField(max_length=64, unique=True, null=True,
                                   help_text="SHA-256 of the short link's code (/c/<code>); the code is not kept")
    provider = models.CharField(max_length=20, blank=True, default="")
    provider_sid = models.CharField(max_length=64, unique=True, null=True)
    status = models.CharField(max_length=12, choices=TextStatus.choices, default=TextStatus.PENDING)
    version = models.PositiveIntegerField(default=1)
    error_code = models.CharField(max_length=12, blank=True, default="", help_text="the provider's error code")
    fallback_ref = models.CharField(max_length=40, blank=True, default="",
                                    help_text="the e-mail notice queued when this text failed (once)")
    created_at = models.DateTimeField()
    status_at = models.DateTimeField(null=True)

    class Meta:
        indexes = [models.Index(fields=["patient", "-created_at"], name="wl_text_patient_recent")]

    def __str__(self) -> str:
        return f"{self.kind} {self.ref}"


class InboundOutcome(models.TextChoices):
    ACCEPTED = "ACCEPTED"  # YES ran the claim (booked, held, or replayed)
    ACKNOWLEDGED = "ACKNOWLEDGED"  # a reply to an automatic booking's text: seen
    DECLINED = "DECLINED"
    GONE = "GONE"  # YES/NO to an offer that has ended
    REFUSED = "REFUSED"  # the claim refused (a conflict)
    OPTED_OUT = "OPTED_OUT"
    OPTED_IN = "OPTED_IN"
    HELP = "HELP"
    UNMATCHED = "UNMATCHED"  # no patient, no open text, or more than one and no code: asked which one
    UNKNOWN_WORD = "UNKNOWN_WORD"


class InboundText(models.Model):
    """One received text, once per provider message id (a replayed webhook answers what the first did)."""

    ref = RefField(prefix="itx")
    provider_sid = models.CharField(max_length=64, unique=True)
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+", null=True)
    patient = models.ForeignKey("scheduling.Patient", on_delete=models.PROTECT, related_name="+", null=True)
    text = models.ForeignKey(TextMessage, on_delete=models.PROTECT, related_name="replies", null=True)
    word = models.CharField(max_length=12, blank=True, default="", help_text="the parsed word (YES, NO, STOP, …)")
    code = models.CharField(max_length=4, blank=True, default="")
    outcome = models.CharField(max_length=14, choices=InboundOutcome.choices)
    answer = models.CharField(max_length=400, blank=True, default="", help_text="the reply sent back (replayed)")
    received_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.word} {self.outcome}"


class AckVia(models.TextChoices):
    REPLY = "REPLY"  # a reply to the "you are booked" text
    LINK = "LINK"  # the text's short link or the claim page opened
    CALENDAR = "CALENDAR"  # the booking's calendar file fetched


class BookingAck(models.Model):
    """An automatic (standing-acceptance) booking waiting to be seen: acknowledged by a reply, a link opened or
    the calendar file fetched; else reminded at ``remind_at`` and released at ``release_at`` (reason
    UNACKNOWLEDGED) so the slot is refilled in time. Timestamps, not a status: each step happens once."""

    ref = RefField(prefix="ack")
    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    offer = models.OneToOneField("waitlist.Offer", on_delete=models.PROTECT, related_name="+")
    booked_at = models.DateTimeField()
    starts_at = models.DateTimeField()
    remind_at = models.DateTimeField()
    release_at = models.DateTimeField()
    acknowledged_at = models.DateTimeField(null=True)
    acknowledged_via = models.CharField(max_length=8, choices=AckVia.choices, blank=True, default="")
    reminded_at = models.DateTimeField(null=True)
    released_at = models.DateTimeField(null=True)
    closed_code = models.CharField(max_length=30, blank=True, default="",
                                   help_text="UNACKNOWLEDGED (released here), or why the release did not happen")

    class Meta:
        indexes = [models.Index(fields=["remind_at"], name="wl_ack_open_remind",
                                condition=models.Q(acknowledged_at=None, released_at=None)),
                   models.Index(fields=["release_at"], name="wl_ack_open_release",
                                condition=models.Q(acknowledged_at=None, released_at=None))]

    def __str__(self) -> str:
        return f"ack {self.offer_id}"
