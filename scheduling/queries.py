"""Scheduling's statements outside the ORM, one typed function each, with why each is raw SQL.

- ``consent_newest_per_channel``: every notice's delivery asks it, so it runs as a server-side prepared statement
  (``common.fastpath.prepared_cursor``) instead of a queryset compiled per call (benchmark 6, docs/benchmarks.md).
"""

from __future__ import annotations

from django.db import connection

from common.fastpath import prepared_cursor

#: The newest row of each channel: ``ContactConsent.objects.filter(patient_id=…).order_by("channel", "-id")
#: .distinct("channel").values_list("channel", "state")`` as the ORM writes it.
_CONSENT_NEWEST_SQL = (
    'SELECT DISTINCT ON ("scheduling_contactconsent"."channel") "scheduling_contactconsent"."channel",'
    ' "scheduling_contactconsent"."state" FROM "scheduling_contactconsent"'
    ' WHERE "scheduling_contactconsent"."patient_id" = %s'
    ' ORDER BY "scheduling_contactconsent"."channel" ASC, "scheduling_contactconsent"."id" DESC'
)


def consent_newest_per_channel(patient_id: int) -> dict[str, str]:
    """``{channel: state}`` of the patient's newest consent row per channel (channels with no row absent)."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(_CONSENT_NEWEST_SQL, [patient_id])
        return dict(cursor.fetchall())
