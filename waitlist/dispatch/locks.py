"""Row locks in the one order used everywhere: vacancy → offer → hold/allocation → entry → appointment.

Parents before children, one row of each kind, so two commands on the same vacancy queue up
instead of deadlocking. Reads that find *which* rows to lock take no lock themselves; the caller
re-checks what it read once the locks are held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, overload

from django.db.models import QuerySet

from common.errors import NotFound
from common.fastpath import PreparedQuery
from scheduling.models import CapacityHold, Clinic
from waitlist.models import Offer, Vacancy, WaitlistEntry


@dataclass
class OfferLocks:
    vacancy: Vacancy
    offer: Offer
    hold: CapacityHold
    entry: WaitlistEntry


def lock_vacancy(vacancy_id: int) -> Vacancy:
    """The vacancy fence: every command that can create or change an offer of it locks it first."""
    # of=self: lock the vacancy row only (the joined rows are read, not locked; resource may be NULL).
    return (
        Vacancy.objects.select_for_update(of=("self",), no_key=True)
        .select_related("clinic", "tenant_group", "resource")
        .get(pk=vacancy_id)
    )


@overload
def lock_entry(entry_id: int, *, skip_locked: Literal[False] = False) -> WaitlistEntry: ...
@overload
def lock_entry(entry_id: int, *, skip_locked: bool) -> WaitlistEntry | None: ...
def lock_entry(entry_id: int, *, skip_locked: bool = False) -> WaitlistEntry | None:
    """Lock an entry; with ``skip_locked``, None when another transaction holds it right now."""
    if skip_locked:
        return WaitlistEntry.objects.select_for_update(skip_locked=True, no_key=True).filter(pk=entry_id).first()
    return WaitlistEntry.objects.select_for_update(no_key=True).get(pk=entry_id)


def offer_chain_queryset(
    *,
    clinic_id: int,
    lookup: dict[str, Any],
    related: tuple[str, ...] = (),
    vacancy_related: tuple[str, ...] = ("tenant_group", "resource"),
    **annotations,
) -> QuerySet[Offer]:
    """The statement of ``lock_offer_chain``: the offer of ``clinic_id`` matching ``lookup`` with its
    vacancy, hold and entry, locked ``FOR NO KEY UPDATE OF`` them in the lock order."""
    return (
        Offer.objects.select_for_update(no_key=True, of=("vacancy", "self", "hold", "entry"))
        .select_related("vacancy", *(f"vacancy__{name}" for name in vacancy_related), "hold", "entry", *related)
        .annotate(**annotations)
        .filter(clinic_id=clinic_id, **lookup)
        .order_by("pk")[:1]
    )


def _chain_locks(offer: Offer | None, clinic: Clinic) -> OfferLocks:
    if offer is None:
        raise NotFound()
    vacancy = offer.vacancy
    vacancy.clinic = clinic  # the offer's clinic is the vacancy's (both checked against ``clinic``)
    offer.clinic = clinic
    return OfferLocks(vacancy=vacancy, offer=offer, hold=offer.hold, entry=offer.entry)


_PLAIN_VACANCY_RELATED = ("tenant_group", "resource")
#: The plain chain (no extra reads), by ref and by id: what expiry, delivery, decline, withdrawal and booking
#: lock, compiled once per process and planned once per connection (the sim's and the storm's hottest lock).
_PLAIN_CHAIN_BY_REF: PreparedQuery[Offer] = PreparedQuery(
    lambda clinic_id, ref: offer_chain_queryset(clinic_id=clinic_id, lookup={"ref": ref}), int, str)
_PLAIN_CHAIN_BY_ID: PreparedQuery[Offer] = PreparedQuery(
    lambda clinic_id, pk: offer_chain_queryset(clinic_id=clinic_id, lookup={"pk": pk}), int, int)


def lock_offer_chain(
    *,
    clinic: Clinic,
    offer_ref: str | None = None,
    offer_id: int | None = None,
    related: tuple[str, ...] = (),
    vacancy_related: tuple[str, ...] = _PLAIN_VACANCY_RELATED,
    **annotations,
) -> OfferLocks:
    """Lock an offer's vacancy, the offer, its hold and its entry, in that order, in one statement.

    ``FOR NO KEY UPDATE OF`` lists the tables in the lock order and PostgreSQL takes the row locks in
    the order of that list, so this queues behind (never deadlocks with) commands that lock the same
    rows one at a time. The hold's allocations are not locked here: they only change together with the
    hold's status (``hold_release``, ``hold_book``), under the hold's lock, which this takes.
    ``related``/``annotations`` let a command read what it needs (its policy, the latest decision) in
    the same statement; unlocked reads of rows the command does not change. A ref outside ``clinic``
    is a NotFound exactly like a missing one. ``vacancy_related``: the vacancy's parents read with it
    (the cascade reads them); the claim reads none, and every join it drops is planning time saved on
    its hottest statement (issue 15). A hot command runs the same statement through a ``PreparedQuery``
    of ``offer_chain_queryset`` (``lock_prepared_chain``) to skip compiling it per call.
    """
    lookup: dict[str, Any] = {"ref": offer_ref} if offer_ref is not None else {"pk": offer_id}
    if offer_ref is not None and not isinstance(offer_ref, str):
        raise NotFound()
    if not related and not annotations and vacancy_related == _PLAIN_VACANCY_RELATED:
        plain = _PLAIN_CHAIN_BY_REF if offer_ref is not None else _PLAIN_CHAIN_BY_ID
        return _chain_locks(plain.first(clinic.pk, offer_ref if offer_ref is not None else offer_id), clinic)
    qs = offer_chain_queryset(
        clinic_id=clinic.pk, lookup=lookup, related=related, vacancy_related=vacancy_related, **annotations
    )
    return _chain_locks(next(iter(qs), None), clinic)


def lock_prepared_chain(prepared: PreparedQuery, *, clinic: Clinic, offer_ref: str, key=None) -> OfferLocks:
    """``lock_offer_chain`` through ``prepared`` (built on ``offer_chain_queryset`` with ``(clinic_id, ref)``):
    the same statement, compiled once per process."""
    if not isinstance(offer_ref, str):
        raise NotFound()
    return _chain_locks(prepared.first(clinic.pk, offer_ref, key=key), clinic)
