"""The console's evidence: per Action-queue row (eligibility checks, ordering key, policy and decision, offer
and hold state), the vacancy panel (its whole story), and the recovery commands each allows. Refs and codes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from common.errors import NotFound
from common.shortcodes import display_code
from common.timefmt import iso_in_zone
from scheduling.models import Clinic
from scheduling.services.consent import provider_channels
from waitlist import queries
from waitlist.dispatch.reads import dispatch_notes, dispatch_reasons_by_vacancy, waiting_state
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    DISPATCHABLE_VACANCY_STATUSES,
    NON_BARRING_WITHDRAW_REASONS,
    DecisionStatus,
    Offer,
    OfferEvent,
    OfferStatus,
    Vacancy,
    WaitlistPolicy,
    offer_withdrawable,
)
from waitlist.reliability.feed import Decision, get_decision_provider
from waitlist.rules import eligibility

#: Hard-eligibility checks shown as evidence: every rule of ``eligibility.RULES`` (the one definition the
#: matcher's page and ``matcher.ineligibility`` are generated from), by its check name.
ELIGIBILITY_CHECKS = eligibility.CHECK_NAMES


def review_vacancies(clinic: Clinic, now: datetime):
    """Vacancies with their review candidate's eligibility evaluated in SQL (one row each, no N+1): the
    rules of ``eligibility.RULES`` bound to each vacancy's own columns, as one boolean array."""
    binding = eligibility.vacancy_row_binding(
        now=now, week_ago=now - timedelta(days=7), channels=list(provider_channels(clinic.settings)),
        non_barring=list(NON_BARRING_WITHDRAW_REASONS),
    )
    current_policy = WaitlistPolicy.objects.filter(clinic=clinic).order_by("-version").values("version")[:1]
    return Vacancy.objects.filter(clinic=clinic).annotate(
        review_checks=queries.review_checks(binding),
        has_active_offer=Exists(Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES)),
        current_policy_version=Subquery(current_policy),
    )


def _with_review_decisions(rows: list[dict], clinic: Clinic) -> list[dict]:
    """Each review candidate's decision, through the ``DecisionProvider`` (one batch for all rows)."""
    decisions = get_decision_provider().decisions_for(
        clinic=clinic, patient_ids={v["review_entry__patient_id"] for v in rows if v["review_entry__patient_id"]}
    )
    for v in rows:
        decision = decisions.get(v["review_entry__patient_id"])
        v["review_decision"] = decision
    return rows


REVIEW_VACANCY_FIELDS = (
    "ref", "status", "version", "starts_at", "ends_at", "close_reason", "exhausted_at", "created_at",
    "waiting_reason", "waiting_until", "practitioner_id",
    "review_entry__ref", "review_entry__practitioner_id", "review_entry__priority_rank",
    "review_entry__waiting_since", "review_entry__status", "review_entry__patient_id",
    "current_policy_version", "has_active_offer", "review_checks",
)


def _effective(decision: Decision | None, now: datetime) -> str:
    return decision.effective_status(now) if decision is not None else DecisionStatus.UNAVAILABLE


def ops_commands(
    *, vacancy_status: str, starts_at: datetime, has_active_offer: bool, in_review: bool, now: datetime,
    offer: dict | None = None,
) -> list[dict]:
    """The recovery commands that apply to a vacancy/offer in its current state (roles are the console's):
    ``withdraw`` an active unbooked offer, ``retry_booking`` an ACCEPTED hold, ``redispatch`` a dispatchable
    vacancy with no active offer, ``review`` (PROMOTE/SKIP) a vacancy in staff review."""
    commands = []
    if offer and offer_withdrawable(offer["status"], offer["hold_status"]):
        commands.append({"name": "withdraw", "target": offer["ref"]})
    if offer and offer["status"] == OfferStatus.ACCEPTED and offer["hold_status"] == "ACCEPTED":
        commands.append({"name": "retry_booking", "target": offer["hold"]})
    dispatchable = vacancy_status in DISPATCHABLE_VACANCY_STATUSES and starts_at > now
    if dispatchable and in_review:
        commands.append({"name": "review", "target": None})
    if dispatchable and not has_active_offer:
        commands.append({"name": "redispatch", "target": None})
    return commands


def _review_evidence(v: dict, clinic: Clinic, now: datetime) -> dict:
    return {
        "vacancy": v["ref"],
        "vacancy_status": v["status"],
        "vacancy_version": v["version"],
        "starts_at": iso_in_zone(v["starts_at"], clinic.timezone),
        "entry": v["review_entry__ref"],
        "entry_status": v["review_entry__status"],
        "slot_fit": 1 if v["review_entry__practitioner_id"] == v["practitioner_id"] else 0,
        "priority_rank": v["review_entry__priority_rank"],
        "waiting_since": iso_in_zone(v["review_entry__waiting_since"], clinic.timezone)
        if v["review_entry__waiting_since"] else None,
        "policy_version": v["current_policy_version"],
        "decision_ref": v["review_decision"].decision_ref if v["review_decision"] else None,
        "decision_status": _effective(v["review_decision"], now),
        "checks": [{"name": name, "passed": passed} for name, passed in zip(ELIGIBILITY_CHECKS, v["review_checks"],
                                                                            strict=True)]
        if v["review_entry__ref"] and v["review_checks"] else [],
        "checks_at": "now",
        "offer": None,
    }


OFFER_EVIDENCE_FIELDS = (
    "ref", "status", "version", "slot_fit", "policy_version", "decision_ref", "decision_status",
    "decision_expires_at", "expires_at", "created_at", "reason_code", "decline_reason", "notified_at",
    "entry__ref", "entry__priority_rank",
    "entry__waiting_since", "entry__status", "hold__ref", "hold__status", "vacancy__ref", "vacancy__status",
    "vacancy__version", "vacancy__starts_at", "vacancy_has_active_offer", "hold__appointment__ref", "standing",
    "renews__ref", "code", "hold__appointment__code",
)


def _offer_evidence(o: dict, clinic: Clinic) -> dict:
    tz = clinic.timezone
    return {
        "vacancy": o["vacancy__ref"],
        "vacancy_status": o["vacancy__status"],
        "vacancy_version": o["vacancy__version"],
        "starts_at": iso_in_zone(o["vacancy__starts_at"], tz),
        "entry": o["entry__ref"],
        "entry_status": o["entry__status"],
        "slot_fit": o["slot_fit"],
        "priority_rank": o["entry__priority_rank"],
        "waiting_since": iso_in_zone(o["entry__waiting_since"], tz),
        "policy_version": o["policy_version"],
        "decision_ref": o["decision_ref"],
        "decision_status": o["decision_status"],
        # An offer exists only if every hard check passed under the vacancy fence (its MATCHED event).
        "checks": [{"name": name, "passed": True} for name in ELIGIBILITY_CHECKS],
        "checks_at": "promotion",
        "offer": {
            "ref": o["ref"], "status": o["status"], "version": o["version"], "hold": o["hold__ref"],
            "hold_status": o["hold__status"], "expires_at": iso_in_zone(o["expires_at"], tz),
            "created_at": iso_in_zone(o["created_at"], tz), "reason_code": o["reason_code"],
            "decline_reason": o["decline_reason"],
            "notified_at": iso_in_zone(o["notified_at"], tz) if o["notified_at"] else None,
            "appointment": o["hold__appointment__ref"], "standing": o["standing"],
            "renews": o["renews__ref"],  # a late accept: the patient's offer that ended unanswered
            "code": display_code(clinic, o["code"]),
            "appointment_code": display_code(clinic, o["hold__appointment__code"] or ""),
        },
    }


def _offers_with_evidence(clinic: Clinic):
    active = Offer.objects.filter(vacancy=OuterRef("vacancy"), status__in=ACTIVE_OFFER_STATUSES)
    return Offer.objects.filter(clinic=clinic).annotate(vacancy_has_active_offer=Exists(active))



UNOFFERED_KINDS = ("VACANCY_NO_CANDIDATE", "VACANCY_WAITING")


def _unoffered_evidence(clinic: Clinic, refs: list[str]) -> dict[str, dict]:
    """The evidence of the queue's vacancy rows: slot, waiting reason and the pass-over counts by reason
    (two queries for a page)."""
    if not refs:
        return {}
    tz = clinic.timezone
    vacancies = list(Vacancy.objects.filter(clinic=clinic, ref__in=refs).values(
        "id", "ref", "status", "version", "starts_at", "waiting_reason", "waiting_until", "exhausted_at"))
    reasons = dispatch_reasons_by_vacancy(clinic=clinic, vacancy_ids=[v["id"] for v in vacancies])
    return {v["ref"]: {
        "vacancy": v["ref"], "vacancy_status": v["status"], "vacancy_version": v["version"],
        "starts_at": iso_in_zone(v["starts_at"], tz), "offer": None, "entry": None, "checks": [],
        "passed_over": reasons.get(v["id"], []),
        "waiting": waiting_state(v["waiting_reason"], v["waiting_until"], tz),
    } for v in vacancies}


@dataclass(frozen=True)
class _PageEvidence:
    """The facts behind one page of queue rows, read in one query per kind of row."""

    reviews: dict[str, dict]
    offers: dict[str, dict]
    unoffered: dict[str, dict]

    @classmethod
    def read(cls, clinic: Clinic, items: list[dict], now: datetime) -> _PageEvidence:
        review_refs = [i["vacancy"] for i in items if i["kind"] == "VACANCY_REVIEW"]
        offer_refs = [i["offer"] for i in items if i.get("offer")]
        reviews = _with_review_decisions(list(
            review_vacancies(clinic, now).filter(ref__in=review_refs).values(*REVIEW_VACANCY_FIELDS)), clinic
        ) if review_refs else []
        offers = _offers_with_evidence(clinic).filter(ref__in=offer_refs).values(*OFFER_EVIDENCE_FIELDS) \
            if offer_refs else []
        unoffered = _unoffered_evidence(clinic, [i["vacancy"] for i in items if i["kind"] in UNOFFERED_KINDS])
        return cls({v["ref"]: v for v in reviews}, {o["ref"]: o for o in offers}, unoffered)

    def of(self, item: dict, clinic: Clinic, now: datetime) -> tuple[dict | None, list[dict]]:
        """One row's evidence and the commands that apply to it."""
        if item["kind"] == "VACANCY_REVIEW" and item["vacancy"] in self.reviews:
            v = self.reviews[item["vacancy"]]
            return _review_evidence(v, clinic, now), ops_commands(
                vacancy_status=v["status"], starts_at=v["starts_at"], has_active_offer=v["has_active_offer"],
                in_review=v["status"] == "REVIEW", now=now)
        if item.get("offer") in self.offers:
            o = self.offers[item["offer"]]
            evidence = _offer_evidence(o, clinic)
            return evidence, ops_commands(
                vacancy_status=o["vacancy__status"], starts_at=o["vacancy__starts_at"],
                has_active_offer=o["vacancy_has_active_offer"], in_review=False, now=now, offer=evidence["offer"])
        if item["kind"] in UNOFFERED_KINDS and item["vacancy"] in self.unoffered:
            return self.unoffered[item["vacancy"]], [{"name": "redispatch", "target": None}]
        return None, []


def ops_queue_evidence(*, clinic: Clinic, items: list[dict], now: datetime | None = None) -> list[dict]:
    """The action queue's rows with ``evidence`` (eligibility checks, ordering key, policy version,
    decision ref and status, offer/hold state) and the ``commands`` that apply, for one page of rows in
    a few queries whatever its size (one over the review vacancies, one over the offers, two over the
    vacancies without an offer)."""
    now = now or timezone.now()
    facts = _PageEvidence.read(clinic, items, now)
    rows = []
    for item in items:
        evidence, commands = facts.of(item, clinic, now)
        for command in commands:
            command["target"] = command["target"] or (evidence or {}).get("vacancy")
        rows.append({**item, "evidence": evidence, "commands": commands})
    return rows


PANEL_VACANCY_FIELDS = (
    *REVIEW_VACANCY_FIELDS, "id", "practitioner__ref", "treatment__ref", "resource__ref", "practitioner__name",
    "treatment__name", "source_appointment__ref", "source_appointment__status", "source_appointment__cancel_reason",
    "source_appointment__cancel_reason_code", "source_appointment__cancelled_by", "source_appointment__updated_at",
    "late_yes_offer__ref", "source_appointment__code",
)


def _panel_vacancy(clinic: Clinic, vacancy_ref, now: datetime) -> dict:
    """The panel's vacancy row with its review candidate's evidence; a foreign or unknown ref is NotFound."""
    if not isinstance(vacancy_ref, str):
        raise NotFound()
    found = _with_review_decisions(
        list(review_vacancies(clinic, now).filter(ref=vacancy_ref).values(*PANEL_VACANCY_FIELDS)), clinic)
    if not found:
        raise NotFound()
    return found[0]


def _panel_events(clinic: Clinic, vacancy_id: int, limit: int) -> list[dict]:
    """The vacancy's latest offer events, newest first."""
    rows = (
        OfferEvent.objects.filter(clinic=clinic, offer__vacancy_id=vacancy_id).order_by("-id")
        .values("offer__ref", "from_status", "to_status", "reason_code", "actor", "correlation_id", "created_at")
        [:limit]
    )
    return [
        {"offer": e["offer__ref"], "from_status": e["from_status"], "to_status": e["to_status"],
         "reason_code": e["reason_code"], "actor": e["actor"], "correlation_id": e["correlation_id"],
         "created_at": iso_in_zone(e["created_at"], clinic.timezone)}
        for e in rows
    ]


def _no_identifiers(*, clinic: Clinic, refs: list[str]) -> dict[str, list[str]]:
    return {}


#: Who knows other systems' identifiers of an appointment (an EHR's ``system|value``): interop, above the
#: waitlist, registers its reader at ``ready()`` (``appointment_identifiers_register``); none without it.
APPOINTMENT_IDENTIFIERS: list[Callable[..., dict[str, list[str]]]] = [_no_identifiers]


def appointment_identifiers_register(reader: Callable[..., dict[str, list[str]]]) -> None:
    APPOINTMENT_IDENTIFIERS[0] = reader


def _source_appointment(v: dict, tz: str, ehr: dict[str, list[str]]) -> dict | None:
    """The cancelled appointment the vacancy came from: why (reason code, words) and who cancelled it (an actor
    ref), and the EHR's identifier if it has one."""
    if not v["source_appointment__ref"]:
        return None
    return {
        "ref": v["source_appointment__ref"], "status": v["source_appointment__status"],
        "code": v["source_appointment__code"],
        "cancel_reason": v["source_appointment__cancel_reason"],
        "cancel_reason_code": v["source_appointment__cancel_reason_code"],
        "cancelled_by": v["source_appointment__cancelled_by"],
        "cancelled_at": iso_in_zone(v["source_appointment__updated_at"], tz),
        "ehr_identifiers": ehr.get(v["source_appointment__ref"], []),
    }


def ops_vacancy_panel(
    *, clinic: Clinic, vacancy_ref: str, now: datetime | None = None, events: int = 30, notes: int = 30
) -> dict:
    """One vacancy for the console's detail panel: state, slot, why it waits (quiet hours, caps), who was
    passed over and why, review candidate with evidence, its offers (each with ordering key, policy
    version, decision ref and status, hold, decline reason), the latest offer events, and the commands
    that apply. A few queries; a foreign or unknown ref is NotFound."""
    now = now or timezone.now()
    tz = clinic.timezone
    v = _panel_vacancy(clinic, vacancy_ref, now)
    offers = [
        _offer_evidence(o, clinic)
        for o in _offers_with_evidence(clinic).filter(vacancy_id=v["id"]).order_by("created_at", "id")
        .values(*OFFER_EVIDENCE_FIELDS)
    ]
    active = next((o["offer"] for o in offers if o["offer"]["status"] in ACTIVE_OFFER_STATUSES), None)
    commands = ops_commands(vacancy_status=v["status"], starts_at=v["starts_at"], has_active_offer=active is not None,
                            in_review=v["status"] == "REVIEW" and v["review_entry__ref"] is not None, now=now,
                            offer=active)
    for command in commands:
        command["target"] = command["target"] or v["ref"]
    booked = next((o["offer"]["appointment"] for o in offers if o["offer"]["appointment"]), None)
    ehr = APPOINTMENT_IDENTIFIERS[0](clinic=clinic, refs=[ref for ref in (v["source_appointment__ref"], booked) if ref])
    return {
        "vacancy": v["ref"], "status": v["status"], "version": v["version"], "close_reason": v["close_reason"],
        "starts_at": iso_in_zone(v["starts_at"], tz), "ends_at": iso_in_zone(v["ends_at"], tz),
        "created_at": iso_in_zone(v["created_at"], tz),
        "exhausted_at": iso_in_zone(v["exhausted_at"], tz) if v["exhausted_at"] else None,
        # A patient's yes after their window, kept while the time is offered to someone else (a late accept).
        "late_yes_offer": v["late_yes_offer__ref"],
        "waiting": waiting_state(v["waiting_reason"], v["waiting_until"], tz),
        "passed_over": dispatch_notes(clinic=clinic, vacancy_id=v["id"], limit=notes),
        "reasons": dispatch_reasons_by_vacancy(clinic=clinic, vacancy_ids=[v["id"]]).get(v["id"], []),
        "source_appointment": _source_appointment(v, tz, ehr),
        "booked_appointment": booked,
        "booked_appointment_ehr_identifiers": ehr.get(booked or "", []),
        "practitioner": v["practitioner__ref"], "treatment": v["treatment__ref"],
        # Names are not patient data: staff read "Dr. Seo · Physiotherapy", not two refs.
        "practitioner_name": v["practitioner__name"], "treatment_name": v["treatment__name"],
        "resource": v["resource__ref"],
        "review": _review_evidence(v, clinic, now) if v["review_entry__ref"] and v["status"] == "REVIEW" else None,
        "offers": offers,
        "active_offer": active,
        "events": _panel_events(clinic, v["id"], events),
        "commands": commands,
    }


def ops_vacancy_ref(*, clinic: Clinic, offer_ref: str = "", hold_ref: str = "") -> str | None:
    """The vacancy of an offer (by its ref or its hold's ref) in this clinic, for the console's panel."""
    offers = Offer.objects.filter(clinic=clinic)
    offers = offers.filter(ref=offer_ref) if offer_ref else offers.filter(hold__ref=hold_ref)
    return offers.values_list("vacancy__ref", flat=True).first()
