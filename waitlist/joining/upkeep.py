"""Upkeep: "do you still need an earlier time?" every ``upkeep_weeks`` of waiting (issue 40).

For a clinic whose ADMIN saved join settings with ``upkeep_weeks`` > 0, beat asks each WAITING entry that has
waited that long since it joined or since its last question (``upkeep_ask_due``): an ``UpkeepAsk`` row and a
notice (outbox topic ``waitlist.upkeep_ask``) with the status link, where the patient answers. Quiet hours and
the daily contact cap defer the notice like any other (``common.notify.send_patient_notice``); no consent on the
clinic's channels skips it. "Yes" keeps the entry (``waiting_since`` starts again only when the clinic says so,
``upkeep_refreshes_wait``) and resumes it if it was paused; "no" withdraws it with the patient's answer as the
reason; no answer in ``upkeep_answer_days`` pauses it (``PAUSED_UNTIL_RESUMED``) until the patient's link or
staff resume it. These are the upkeep's services: the only writers of ``UpkeepAsk`` rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, OuterRef, Q, Subquery
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from common.cas import cas_update
from common.models import OutboxMessage
from common.notify import send_patient_notice
from common.outbox import DeliverySkipped
from common.services import audit_record, new_correlation_id, outbox_enqueue
from scheduling.models import Patient
from scheduling.services.consent import consent_granted, provider_channels
from waitlist.dispatch.locks import lock_entry
from waitlist.effects import queue_delivery
from waitlist.joining.models import JoinSettings, UpkeepAsk, UpkeepOutcome
from waitlist.joining.services import PAUSED_UNTIL_RESUMED
from waitlist.joining.tokens import status_link
from waitlist.models import EntryStatus, WaitlistEntry
from waitlist.notices.offer_notice import LANGUAGES, optout_line
from waitlist.offers.tokens import optout_link
from waitlist.rules.reachability import send_window
from waitlist.services import entry_withdraw, policy_current

TOPIC = "waitlist.upkeep_ask"


def upkeep_ask_due(*, now: datetime | None = None, limit: int = 500) -> int:
    """Ask every due entry (beat): WAITING for ``upkeep_weeks`` since it joined and since its last question,
    with no question open. Returns how many were asked."""
    now = now or timezone.now()
    asked = 0
    for settings in JoinSettings.objects.select_related("clinic__tenant_group").filter(upkeep_weeks__gt=0):
        since = now - timedelta(weeks=settings.upkeep_weeks)
        last = UpkeepAsk.objects.filter(entry_id=OuterRef("pk")).order_by("-asked_at").values("asked_at")[:1]
        due = (WaitlistEntry.objects.filter(clinic=settings.clinic, status=EntryStatus.WAITING, created_at__lte=since)
               .annotate(last_asked=Subquery(last)).filter(Q(last_asked__isnull=True) | Q(last_asked__lte=since))
               .exclude(paused_until__gt=now).order_by("created_at").values_list("pk", "ref", "patient__ref")[:limit])
        for entry_id, entry_ref, patient_ref in due:
            with transaction.atomic():
                ask = UpkeepAsk.objects.create(entry_id=entry_id, clinic=settings.clinic, asked_at=now,
                                               answer_by=now + timedelta(days=settings.upkeep_answer_days))
                outbox_enqueue(topic=TOPIC, tenant_group_ref=settings.clinic.tenant_group.ref,
                               clinic_ref=settings.clinic.ref, aggregate_ref=entry_ref, recipient_ref=patient_ref,
                               payload={"entry": entry_ref, "ask": ask.pk, "patient": patient_ref})
                queue_delivery()
            asked += 1
    return asked


def upkeep_text(patient: Patient, entry: WaitlistEntry, link: str) -> tuple[str, str]:
    with translation.override(patient.language if patient.language in LANGUAGES else "en"):
        clinic = patient.clinic.name_in(translation.get_language())
        subject = _("Do you still need an earlier time at %(clinic)s?") % {"clinic": clinic}
        body = _("You are on the waiting list of %(clinic)s for %(treatment)s. Do you still need an earlier "
                 "time? Answer yes or no here (if we do not hear from you within a week, we pause your place):"
                 "\n%(link)s\n") % {"clinic": clinic, "treatment": entry.treatment.name_in(translation.get_language()),
                                    "link": link}
    return subject, body


def deliver_upkeep_ask(message: OutboxMessage) -> str:
    """The outbox handler: the question with the status link, through the clinic's provider and its rules."""
    now = timezone.now()
    payload = message.payload or {}
    ask = UpkeepAsk.objects.select_related("entry__patient__clinic", "entry__treatment").filter(
        pk=int(payload.get("ask") or 0)).first()
    if ask is None or ask.outcome != UpkeepOutcome.ASKED or ask.entry.status != EntryStatus.WAITING:
        raise DeliverySkipped("UPKEEP_CLOSED")
    patient, clinic = ask.entry.patient, ask.entry.patient.clinic
    if not consent_granted(patient.pk, provider_channels(clinic.settings)):
        raise DeliverySkipped("CONSENT_REVOKED")
    link = status_link(patient)
    subject, body = upkeep_text(patient, ask.entry, link)
    body += optout_line(optout_link(patient), patient.language)
    return send_patient_notice(message=message, clinic=clinic, patient=patient,
                               window=send_window(policy_current(clinic=clinic), clinic), subject=subject, body=body,
                               link=link, now=now)


def open_question(entry: WaitlistEntry) -> UpkeepAsk | None:
    """The entry's unanswered question, or the one whose silence paused it (still answerable)."""
    return (UpkeepAsk.objects.filter(entry=entry, outcome__in=(UpkeepOutcome.ASKED, UpkeepOutcome.PAUSED))
            .order_by("-asked_at").first())


def upkeep_answer(*, patient: Patient, entry_ref: str, still_needed: bool, now: datetime | None = None) -> None:
    """The patient's answer (status page): yes keeps (and resumes) the entry, no withdraws it; audited."""
    now = now or timezone.now()
    entry_id = (WaitlistEntry.objects.filter(clinic_id=patient.clinic_id, patient=patient, ref=entry_ref)
                .values_list("pk", flat=True).first())
    if entry_id is None:
        from common.errors import NotFound

        raise NotFound()
    if not still_needed:
        with transaction.atomic():
            UpkeepAsk.objects.filter(entry_id=entry_id, outcome__in=(UpkeepOutcome.ASKED, UpkeepOutcome.PAUSED)
                                     ).update(outcome=UpkeepOutcome.NOT_NEEDED, answered_at=now)
            entry_withdraw(clinic=patient.clinic, entry_ref=entry_ref, actor=None,
                           reason="patient: no longer needs an earlier time (upkeep question)")
        return
    with transaction.atomic():
        entry = lock_entry(entry_id)
        settings = JoinSettings.objects.filter(clinic_id=patient.clinic_id).first()
        changes: dict = {}
        if entry.paused_until == PAUSED_UNTIL_RESUMED:
            changes["paused_until"] = None
        if settings is not None and settings.upkeep_refreshes_wait and entry.status == EntryStatus.WAITING:
            changes["waiting_since"] = now
        if changes:
            cas_update(entry, **changes)
        UpkeepAsk.objects.filter(entry_id=entry_id, outcome__in=(UpkeepOutcome.ASKED, UpkeepOutcome.PAUSED)
                                 ).update(outcome=UpkeepOutcome.STILL_NEEDED, answered_at=now)
        audit_record(actor=None, action="waitlist.upkeep_answer", clinic=patient.clinic, target_ref=entry.ref,
                     reason="patient: still needs an earlier time", correlation_id=new_correlation_id(),
                     system_label="patient", result={"refreshed_wait": "waiting_since" in changes})


def upkeep_pause_silent(*, now: datetime | None = None, limit: int = 500) -> int:
    """Pause the entries whose question went unanswered past ``answer_by`` (beat). Returns how many."""
    now = now or timezone.now()
    paused = 0
    for ask_id, entry_id in (UpkeepAsk.objects.filter(outcome=UpkeepOutcome.ASKED, answer_by__lte=now)
                             .order_by("answer_by").values_list("pk", "entry_id")[:limit]):
        with transaction.atomic():
            entry = lock_entry(entry_id)
            if entry.status == EntryStatus.WAITING and entry.paused_until != PAUSED_UNTIL_RESUMED:
                cas_update(entry, paused_until=PAUSED_UNTIL_RESUMED)
            UpkeepAsk.objects.filter(pk=ask_id, outcome=UpkeepOutcome.ASKED).update(outcome=UpkeepOutcome.PAUSED)
            paused += 1
    return paused


def upkeep_resume(*, clinic, entry_ref: str, actor) -> WaitlistEntry:
    """STAFF: resume an entry its patient's silence paused (on the patient's word, audited)."""
    from scheduling.scoping import require_command_role, scoped_get

    require_command_role(actor, clinic, "entry_resume")
    entry_id = scoped_get(WaitlistEntry, clinic, entry_ref).pk
    with transaction.atomic():
        entry = lock_entry(entry_id)
        if entry.paused_until is not None:
            cas_update(entry, paused_until=None)
        UpkeepAsk.objects.filter(entry_id=entry_id, outcome=UpkeepOutcome.PAUSED).update(
            outcome=UpkeepOutcome.STILL_NEEDED, answered_at=timezone.now())
        audit_record(actor=actor, action="waitlist.entry_resume", clinic=clinic, target_ref=entry.ref,
                     correlation_id=new_correlation_id())
    return entry


def upkeep_counts(clinic_ids: list[int]) -> dict[int, dict[str, int]]:
    """Per clinic: the questions by outcome (asked and open, still needed, not needed, paused), one query."""
    counts: dict[int, dict[str, int]] = {}
    for clinic_id, outcome, n in (UpkeepAsk.objects.filter(clinic_id__in=clinic_ids).values("clinic_id", "outcome")
                                  .annotate(n=Count("id")).order_by().values_list("clinic_id", "outcome", "n")):
        counts.setdefault(clinic_id, {})[outcome] = n
    return counts
