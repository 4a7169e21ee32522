"""Row locks in the one order used everywhere: vacancy → offer → hold/allocation → entry → appointment.

Parents before children, one row of each kind, so two commands on the same vacancy queue up
instead of deadlocking. Reads that find *which* rows to lock take no lock themselves; the caller
re-checks what it read once the locks are held.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.errors import NotFound
from scheduling.models import CapacityAllocation, CapacityHold, Clinic

from .models import Offer, Vacancy, WaitlistEntry


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


def lock_entry(entry_id: int, *, skip_locked: bool = False) -> WaitlistEntry | None:
    """Lock an entry; with ``skip_locked``, None when another transaction holds it right now."""
    if skip_locked:
        return WaitlistEntry.objects.select_for_update(skip_locked=True, no_key=True).filter(pk=entry_id).first()
    return WaitlistEntry.objects.select_for_update(no_key=True).get(pk=entry_id)


def lock_offer_chain(
    *, clinic: Clinic, offer_ref: str | None = None, offer_id: int | None = None
) -> OfferLocks:
    """Lock an offer's vacancy, the offer, its hold (and active allocation) and its entry, in order.

    A ref outside ``clinic`` is a NotFound exactly like a missing one.
    """
    lookup = {"ref": offer_ref} if offer_ref is not None else {"pk": offer_id}
    if offer_ref is not None and not isinstance(offer_ref, str):
        raise NotFound()
    # Unlocked read of immutable links (vacancy, hold, entry never change on an offer).
    links = (
        Offer.objects.filter(clinic=clinic, **lookup)
        .values("pk", "vacancy_id", "hold_id", "entry_id")
        .first()
    )
    if links is None:
        raise NotFound()
    vacancy = lock_vacancy(links["vacancy_id"])
    offer = Offer.objects.select_for_update(no_key=True).get(pk=links["pk"])
    hold = CapacityHold.objects.select_for_update(no_key=True).get(pk=links["hold_id"])
    list(CapacityAllocation.objects.select_for_update(no_key=True).filter(hold_id=hold.pk, active=True))
    entry = lock_entry(links["entry_id"])
    return OfferLocks(vacancy=vacancy, offer=offer, hold=hold, entry=entry)
