"""A reply is an answer: the inbound webhook's service.

The reply is read for one word (yes, no, or a carrier keyword) and a 4-digit code, and nothing else of it is
kept. It is matched by the sender's number to the patient's texts of the last ``TEXT_REPLY_DAYS``: by its code
when it has one, else to the one offer still open (or the one text there is). No patient, no such text, or more
than one and no code: a short "which one?" and nothing changes. YES runs the claim page's own commands
(``offer_claim_and_book``; after the window, ``offer_late_accept_and_book``), NO the patient's decline with reason
``SMS_DECLINE``. Each received message is recorded once by its provider id (``InboundText``): the same webhook
again answers what the first did and changes nothing; every change is audited with that id as evidence.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from common.errors import Conflict, NotFound
from common.services import audit_record, new_correlation_id
from scheduling.models import ConsentSource, ConsentState, ContactChannel, Patient
from scheduling.services.consent import consent_record
from waitlist.models import DeclineReason, OfferStatus
from waitlist.offers.accept import offer_claim_and_book, offer_late_accept_and_book
from waitlist.offers.claim_reads import AnswerStep, ClaimState, answer_step, claim_offer, claim_outcome, renewal_of
from waitlist.offers.offers import offer_decline
from waitlist.texts import compose
from waitlist.texts.models import AckVia, InboundOutcome, InboundText, TextKind, TextMessage
from waitlist.texts.services.acknowledgement import acknowledgement_record

logger = logging.getLogger("waitlist")

YES_WORDS = frozenset({"YES", "Y", "1", "OK", "YEP", "SURE", "네", "예", "응", "수락", "좋아요"})
NO_WORDS = frozenset({"NO", "N", "2", "NOPE", "아니요", "아니오", "아니", "거절"})
STOP_WORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"})
START_WORDS = frozenset({"START", "UNSTOP"})
HELP_WORDS = frozenset({"HELP", "INFO"})
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_CODE = re.compile(r"^\d{4}$")


@dataclass(frozen=True)
class Parsed:
    word: str  # YES, NO, STOP, START, HELP, or "" (not understood)
    code: str  # the 4-digit code, or ""


def reply_parse(body: str) -> Parsed:
    """The reply's word (its first token that is one) and code (its first 4-digit token)."""
    tokens = [t.upper() for t in _TOKEN.findall(body or "")][:8]
    code = next((t for t in tokens if _CODE.match(t)), "")
    for token in tokens:
        if token == code:
            continue
        for word, words in (("STOP", STOP_WORDS), ("START", START_WORDS), ("HELP", HELP_WORDS), ("YES", YES_WORDS),
                            ("NO", NO_WORDS)):
            if token in words:
                return Parsed(word, code)
    return Parsed("", code)


def text_reply_receive(*, sid: str, sender: str, body: str, now: datetime) -> str:
    """Act on one received text (once per ``sid``) and return the answer to send back ("" for none)."""
    try:
        with transaction.atomic():
            record = InboundText.objects.create(provider_sid=sid, outcome=InboundOutcome.UNMATCHED, received_at=now)
    except IntegrityError:
        return InboundText.objects.filter(provider_sid=sid).values_list("answer", flat=True).first() or ""
    parsed = reply_parse(body)
    try:
        outcome, answer, patient, text = _act(record, parsed, sender, now)
    except Exception:
        InboundText.objects.filter(pk=record.pk).delete()  # Twilio's retry of this message may try again
        raise
    InboundText.objects.filter(pk=record.pk).update(
        word=parsed.word, code=parsed.code, outcome=outcome, answer=answer[:400], patient=patient,
        clinic_id=patient.clinic_id if patient is not None else None, text=text)
    return answer


def _act(record: InboundText, parsed: Parsed, sender: str, now: datetime):
    patients = list(Patient.objects.select_related("clinic__tenant_group").filter(phone=sender).order_by("pk")) \
        if sender else []
    if not patients:
        return InboundOutcome.UNMATCHED, compose.unknown_sender_answer(), None, None
    first = patients[0]
    if parsed.word == "STOP":
        for patient in patients:
            consent_record(patient=patient, channels=[ContactChannel.SMS], state=ConsentState.REVOKED,
                           source=ConsentSource.TEXT_REPLY, actor_label=f"patient:{patient.ref}",
                           evidence=f"twilio:{record.provider_sid}", now=now)
        return InboundOutcome.OPTED_OUT, compose.stopped_answer(first.language), first, None
    if parsed.word == "START":
        for patient in patients:
            consent_record(patient=patient, channels=[ContactChannel.SMS], state=ConsentState.GRANTED,
                           source=ConsentSource.PATIENT_CONSENT, actor_label=f"patient:{patient.ref}",
                           evidence=f"twilio:{record.provider_sid}", now=now)
        return InboundOutcome.OPTED_IN, compose.started_answer(first.language), first, None
    texts = list(TextMessage.objects.select_related("offer", "clinic__tenant_group", "patient")
                 .filter(patient__in=patients, created_at__gte=now - timedelta(days=settings.TEXT_REPLY_DAYS))
                 .order_by("-created_at"))
    if parsed.word == "HELP":
        clinic = texts[0].clinic if texts else first.clinic
        return InboundOutcome.HELP, compose.help_answer(clinic=clinic, language=first.language), first, None
    if parsed.word not in ("YES", "NO"):
        return InboundOutcome.UNKNOWN_WORD, compose.which_one_answer(first.language), first, None
    text = _match(texts, parsed.code)
    if text is None:
        return InboundOutcome.UNMATCHED, compose.which_one_answer(first.language), first, None
    outcome, answer = _answer(text, parsed.word)
    audit_record(actor=None, action="text_reply", clinic=text.clinic, target_ref=text.offer.ref if text.offer else "",
                 reason=parsed.word, result={"message_sid": record.provider_sid, "text": text.ref,
                                             "code": parsed.code, "outcome": outcome},
                 system_label=f"text:{text.patient.ref}")
    return outcome, answer, text.patient, text


def _match(texts: list[TextMessage], code: str) -> TextMessage | None:
    """The one text a reply answers: by code; else the one open offer; else, with none open, the newest text
    when every text is about one offer (``texts`` come newest first): an offer's text and its booking's
    confirmation, or an automatic booking's text and its reminder, are one question, not two."""
    if code:
        named = [t for t in texts if t.reply_code == code]
        return named[0] if len(named) == 1 else None
    open_offers = [t for t in texts if t.kind == TextKind.OFFER and t.offer is not None
                   and t.offer.status == OfferStatus.OFFERED]
    if len(open_offers) == 1:
        return open_offers[0]
    return texts[0] if not open_offers and len({t.offer_id for t in texts}) == 1 else None


def _answer(text: TextMessage, word: str) -> tuple[str, str]:
    clinic, patient = text.clinic, text.patient
    offer = claim_offer(text.offer.ref, text.offer.entry.ref) if text.offer is not None else None
    if offer is None:
        return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)
    offer = renewal_of(offer)
    outcome = claim_outcome(offer)
    if text.kind == TextKind.BOOKED:  # "you are booked": a reply says it was seen
        if outcome.state != ClaimState.BOOKED:
            return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)
        if word == "NO" and offer.standing:  # "Reply YES to keep it": NO gives the automatic booking back
            return _release(offer)
        acknowledgement_record(offer_id=offer.pk, via=AckVia.REPLY)
        return InboundOutcome.ACKNOWLEDGED, compose.booked_answer(clinic=clinic, language=patient.language,
                                                                  starts_at=offer.vacancy.starts_at)
    if word == "NO":
        return _decline(offer, outcome)
    step = answer_step(outcome, yes=True)
    if step == AnswerStep.LATE_ACCEPT:
        try:
            offer_late_accept_and_book(clinic=offer.clinic, offer_ref=offer.ref, patient=offer.patient,
                                       correlation_id=new_correlation_id())
        except NotFound:
            return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)
        except Conflict as exc:
            logger.info("text reply: offer %s not taken up late: %s", offer.ref, exc.code)
            return InboundOutcome.REFUSED, compose.refused_answer(clinic=clinic, language=patient.language)
    elif step == AnswerStep.CLAIM:
        try:
            offer_claim_and_book(offer=offer, correlation_id=new_correlation_id())
        except NotFound:
            return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)
        except Conflict as exc:
            logger.info("text reply: offer %s not claimed: %s", offer.ref, exc.code)
            return InboundOutcome.REFUSED, compose.refused_answer(clinic=clinic, language=patient.language)
    else:
        return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)
    fresh = claim_offer(offer.ref, offer.entry.ref)
    fresh = renewal_of(fresh) if fresh is not None else offer
    after = claim_outcome(fresh)
    starts_at = fresh.vacancy.starts_at
    if after.state == ClaimState.BOOKED:
        return InboundOutcome.ACCEPTED, compose.booked_answer(clinic=clinic, language=patient.language,
                                                              starts_at=starts_at)
    if after.state == ClaimState.HELD:
        return InboundOutcome.ACCEPTED, compose.held_answer(clinic=clinic, language=patient.language,
                                                            starts_at=starts_at)
    return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)


def _release(offer) -> tuple[str, str]:
    """NO to an automatic booking's text: the claim page's **Release this time** (``standing_release``: the slot
    reopens for the cascade, the patient waits again). Past its release deadline it stands: seen, and the
    answer says to call the clinic."""
    from waitlist.standing.services import standing_release

    clinic, patient = offer.clinic, offer.patient
    try:
        standing_release(clinic=clinic, offer_ref=offer.ref, patient=patient, correlation_id=new_correlation_id())
    except NotFound:
        return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)
    except Conflict as exc:
        logger.info("text reply: offer %s not released: %s", offer.ref, exc.code)
        acknowledgement_record(offer_id=offer.pk, via=AckVia.REPLY)
        return InboundOutcome.ACKNOWLEDGED, compose.release_closed_answer(clinic=clinic, language=patient.language)
    return InboundOutcome.DECLINED, compose.declined_answer(clinic=clinic, language=patient.language)


def _decline(offer, outcome) -> tuple[str, str]:
    clinic, patient = offer.clinic, offer.patient
    step = answer_step(outcome, yes=False)
    if step == AnswerStep.ALREADY_DECLINED:
        return InboundOutcome.DECLINED, compose.declined_answer(clinic=clinic, language=patient.language)
    if step == AnswerStep.ENDED:
        return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)
    try:
        offer_decline(clinic=clinic, offer_ref=offer.ref, patient=patient, reason=DeclineReason.SMS_DECLINE,
                      correlation_id=new_correlation_id())
    except NotFound:
        return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)
    except Conflict as exc:
        logger.info("text reply: offer %s not declined: %s", offer.ref, exc.code)
        return InboundOutcome.GONE, compose.gone_answer(clinic=clinic, language=patient.language)
    return InboundOutcome.DECLINED, compose.declined_answer(clinic=clinic, language=patient.language)
