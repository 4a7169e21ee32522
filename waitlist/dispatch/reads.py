"""Why a vacancy has no offer: the pass-overs dispatch noted, the waiting reason and until when. Read by
the API's vacancy detail and dispatch answer, and by the console's queue and vacancy panel."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Exists, Max, OuterRef

from common.timefmt import iso_in_zone
from scheduling.models import Clinic
from waitlist.models import ACTIVE_OFFER_STATUSES, DispatchNote, Offer, Vacancy, VacancyStatus


def unoffered_vacancies(*, clinic: Clinic, now: datetime):
    """OPEN vacancies, not started, with no active offer (the queue's and the overview's one definition)."""
    active = Offer.objects.filter(vacancy=OuterRef("pk"), status__in=ACTIVE_OFFER_STATUSES)
    return Vacancy.objects.filter(clinic=clinic, status=VacancyStatus.OPEN, starts_at__gt=now).exclude(Exists(active))


def waiting_state(reason: str, until: datetime | None, tz: str) -> dict | None:
    """A vacancy's waiting state as shown (quiet hours, contact caps): its reason and until when, or None."""
    if not reason:
        return None
    return {"reason": reason, "until": iso_in_zone(until, tz) if until else None}


def dispatch_reasons_by_vacancy(*, clinic: Clinic, vacancy_ids: list[int]) -> dict[int, list[dict]]:
    """Per vacancy, how many entries dispatch passed over for each reason (``DispatchNote``), most first:
    one grouped query for any number of vacancies. Vacancy-wide notes (quiet hours) count as one."""
    rows = (
        DispatchNote.objects.filter(clinic=clinic, vacancy_id__in=vacancy_ids)
        .values("vacancy_id", "reason_code")
        .annotate(entries=Count("id"), until=Max("until"))
        .order_by("vacancy_id", "-entries", "reason_code")
    )
    reasons: dict[int, list[dict]] = {}
    for r in rows:
        until = iso_in_zone(r["until"], clinic.timezone) if r["until"] else None
        reasons.setdefault(r["vacancy_id"], []).append(
            {"reason_code": r["reason_code"], "entries": r["entries"], "until": until})
    return reasons


def dispatch_reasons(*, clinic: Clinic, vacancy: Vacancy, stats=None) -> dict:
    """Why a vacancy has no offer now: the pass-over counts by reason, the waiting reason and until when,
    and (right after a dispatch, from the matcher's ``stats``) how many candidates it read and any budget
    that cut the read short."""
    tz = clinic.timezone
    body: dict = {
        "passed_over": dispatch_reasons_by_vacancy(clinic=clinic, vacancy_ids=[vacancy.pk]).get(vacancy.pk, []),
        "waiting": waiting_state(vacancy.waiting_reason, vacancy.waiting_until, tz),
        "exhausted_at": iso_in_zone(vacancy.exhausted_at, tz) if vacancy.exhausted_at else None,
    }
    if stats is not None:
        body["candidates_read"] = stats.candidates
        body["budget_hit"] = stats.budget_hit or None
    return body


def dispatch_notes(*, clinic: Clinic, vacancy_id: int, limit: int = 30) -> list[dict]:
    """Why dispatch passed over entries of this vacancy (or why it waits), newest first: one query."""
    tz = clinic.timezone
    rows = (
        DispatchNote.objects.filter(clinic=clinic, vacancy_id=vacancy_id)
        .order_by("-last_at", "-id")
        .values("entry__ref", "reason_code", "until", "times", "first_at", "last_at")[:limit]
    )
    return [
        {"entry": r["entry__ref"], "reason_code": r["reason_code"],
         "until": iso_in_zone(r["until"], tz) if r["until"] else None, "times": r["times"],
         "first_at": iso_in_zone(r["first_at"], tz), "last_at": iso_in_zone(r["last_at"], tz)}
        for r in rows
    ]
