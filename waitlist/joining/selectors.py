"""What the patient's status page reads: their entries at the clinic, each with a band, never a position.

The list is not first come, first served (availability, practitioner, window and the booking-reliability
decision decide who fits a time), so the page says where an entry stands in words: "near the front", "in the
middle", "further back", counted among the WAITING entries of the same treatment in the matcher's own order
(``priority_key``, ``waiting_since``, ``id``), as an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from scheduling.models import Patient
from waitlist.models import OPEN_ENTRY_STATUSES, EntryStatus, WaitlistEntry

BANDS = ("NEAR_FRONT", "MIDDLE", "FURTHER_BACK")


def band(ahead: int, total: int) -> str:
    """The share of the list ahead: the first fifth (or the first 3) is near the front, up to half the middle."""
    if ahead < max(3, total // 5):
        return "NEAR_FRONT"
    if ahead < total // 2:
        return "MIDDLE"
    return "FURTHER_BACK"


@dataclass(frozen=True)
class StatusRow:
    entry: WaitlistEntry
    band: str | None  # None unless WAITING


def patient_entries(patient: Patient) -> list[StatusRow]:
    """The patient's entries at their clinic, open ones first, newest first."""
    entries = list(WaitlistEntry.objects.select_related("treatment", "practitioner")
                   .filter(clinic_id=patient.clinic_id, patient=patient).order_by("-created_at")[:20])
    rows = []
    for entry in entries:
        position = None
        if entry.status == EntryStatus.WAITING:
            same = WaitlistEntry.objects.filter(clinic_id=entry.clinic_id, treatment_id=entry.treatment_id,
                                                status=EntryStatus.WAITING)
            ahead = same.filter(Q(priority_key__lt=entry.priority_key)
                                | Q(priority_key=entry.priority_key, waiting_since__lt=entry.waiting_since)
                                | Q(priority_key=entry.priority_key, waiting_since=entry.waiting_since,
                                    id__lt=entry.pk)).count()
            position = band(ahead, same.count())
        rows.append(StatusRow(entry=entry, band=position))
    return sorted(rows, key=lambda row: row.entry.status not in OPEN_ENTRY_STATUSES)
