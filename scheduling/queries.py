"""Scheduling's statements outside the ORM, one typed function each, with why each is raw SQL.

States come from the models' ``TextChoices`` and transition tables (``transition_sources``), bound as parameters
or formatted from the enum (``sql_states``), never typed into the text. Another app calls these functions; it
never sees their text.

- ``consent_newest_per_channel``: every notice's delivery asks it, so it runs as a server-side prepared statement
  (``common.fastpath.prepared_cursor``) instead of a queryset compiled per call (benchmark 6, docs/benchmarks.md).
- ``hold_place_with_allocation``: a waitlist offer's hold and its allocation in one statement, prepared (dispatch's
  hot path: benchmarks 2 and 6, issue 15); the ORM needs two INSERTs and compiles each per call.
- ``hold_accept_locked`` / ``hold_extend_active``: a locked hold's compare-and-set as one prepared ``UPDATE …
  RETURNING id`` (the claim, benchmark 3, and each offer notice's delivery, benchmark 6, run them); ``cas_update``
  would compile the UPDATE per call. The waitlist calls them as steps of their own, never splicing their text into
  its statements (their cost against the old spliced statement: ``bench/hold_step_ab.py``, waitlist/queries.py).
- ``allocations_lock_for_appointments`` / ``appointments_cancel_rows``: a cancellation (one appointment, or a
  reevaluation round's HELD ones) and its allocations' release in one prepared statement over arrays (the storm's
  cancellations, benchmark 6; the reevaluation round, benchmark 4); the ORM needs a statement per row.
- ``clinic_codenames``: the permissions a user holds on the outer query's clinic as one ``ARRAY`` subplan, planned
  in a fraction of a millisecond where the ORM's six EXISTS took ~9 ms (every API request; benchmark 3, issue 15).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models.expressions import RawSQL

from common.cas import sql_states, transition_sources
from common.fastpath import prepared_cursor

from .models import CapacityHold, HoldStatus

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


# ``{hold}``: the ORM's own INSERT of the hold (``common.fastpath.insert_sql``), fixed text per model.
_HOLD_PLACE_SQL = """
WITH hold AS ({hold} RETURNING id), allocation AS (
    INSERT INTO scheduling_capacityallocation
        (clinic_id, practitioner_id, resource_id, patient_id, period, active, kind, hold_id, appointment_id,
         created_at)
    SELECT %s, %s, %s, %s, %s, true, %s, hold.id, NULL, %s FROM hold
)
SELECT id FROM hold
"""


def hold_place_with_allocation(
    hold_insert: str, hold_params: list, *, clinic_id: int, practitioner_id: int, resource_id: int | None,
    patient_id: int, period: Any, kind: str, created_at: datetime,
) -> int:
    """Insert the hold (``hold_insert``/``hold_params``: ``insert_sql`` of the unsaved hold) and its active
    allocation of ``kind`` over ``period``; returns the hold's id. The exclusion constraints judge the allocation."""
    params = [*hold_params, clinic_id, practitioner_id, resource_id, patient_id, period, kind, created_at]
    with prepared_cursor(connection) as cursor:
        cursor.execute(_HOLD_PLACE_SQL.format(hold=hold_insert), params)
        return cursor.fetchone()[0]


_HOLD_ACCEPT_SQL = f"""
UPDATE scheduling_capacityhold SET status = {sql_states(HoldStatus.ACCEPTED)}, version = version + 1,
    expires_at = %(expires)s
WHERE id = %(hold)s AND version = %(version)s
  AND status IN ({sql_states(transition_sources(CapacityHold, HoldStatus.ACCEPTED, HoldStatus.ACTIVE))})
  AND EXISTS (SELECT 1 FROM scheduling_capacityallocation a WHERE a.hold_id = %(hold)s AND a.active)
RETURNING id
"""


def hold_accept_locked(hold_id: int, *, version: int, expires_at: datetime) -> bool:
    """The hold ACTIVE → ACCEPTED with its new expiry, at ``version`` and only while it still has its active
    allocation; True when the row changed. The caller holds the hold locked (mid-claim)."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(_HOLD_ACCEPT_SQL, {"hold": hold_id, "version": version, "expires": expires_at})
        return cursor.fetchone() is not None


_HOLD_EXTEND_SQL = f"""
UPDATE scheduling_capacityhold SET version = version + 1, updated_at = %(now)s, expires_at = %(expires)s
WHERE id = %(hold)s AND status IN ({sql_states(HoldStatus.ACTIVE)})
RETURNING id
"""


def hold_extend_active(hold_id: int, *, expires_at: datetime, now: datetime) -> bool:
    """Move an ACTIVE hold's expiry to ``expires_at``; True when the row changed (False: no longer ACTIVE). The
    caller holds the hold's owner locked (its offer)."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(_HOLD_EXTEND_SQL, {"hold": hold_id, "expires": expires_at, "now": now})
        return cursor.fetchone() is not None


_LOCK_ALLOCATIONS_SQL = """
SELECT id FROM scheduling_capacityallocation WHERE active AND appointment_id = ANY(%(ids)s)
ORDER BY id FOR NO KEY UPDATE
"""


def allocations_lock_for_appointments(appointment_ids: list[int]) -> None:
    """Lock (FOR NO KEY UPDATE, in id order) the active allocations of ``appointment_ids``."""
    with connection.cursor() as cursor:
        cursor.execute(_LOCK_ALLOCATIONS_SQL, {"ids": appointment_ids})


_CANCEL_SQL = """
WITH cancelled AS (
    UPDATE scheduling_appointment AS a
    SET status = %(cancelled)s, cancel_reason = v.reason, cancel_reason_code = v.code, cancelled_by = v.actor,
        version = a.version + 1, updated_at = %(now)s
    FROM unnest(%(ids)s::bigint[], %(versions)s::int[], %(reasons)s::text[], %(codes)s::text[], %(actors)s::text[])
        AS v(id, version, reason, code, actor)
    WHERE a.id = v.id AND a.status = ANY(%(sources)s) AND a.version = v.version
    RETURNING a.id),
released AS (
    UPDATE scheduling_capacityallocation AS c SET active = false
    FROM cancelled WHERE c.active AND c.appointment_id = cancelled.id
    RETURNING c.id)
SELECT array(SELECT id FROM cancelled), (SELECT count(*) FROM released)
"""


def appointments_cancel_rows(
    *, cancelled: str, ids: list[int], versions: list[int], reasons: list[str], codes: list[str],
    actors: list[str], sources: list[str], now: datetime, prepared: bool = True,
) -> list[int]:
    """Set each appointment of ``ids`` at its ``versions`` and in one of ``sources`` to ``cancelled`` (the
    status) with its reason, code and actor, and release its active allocations; returns the ids it cancelled.
    ``prepared=False``: a one-off statement (a round's batch), not kept prepared on the connection."""
    params: dict[str, Any] = {"cancelled": cancelled, "sources": sources, "now": now, "ids": ids, "versions": versions,
              "reasons": reasons, "codes": codes, "actors": actors}
    with prepared_cursor(connection) if prepared else connection.cursor() as cursor:
        cursor.execute(_CANCEL_SQL, params)
        return cursor.fetchone()[0]


#: The scheduling permissions ``%s`` (a user id, twice) holds on the outer query's clinic, directly or
#: through a group: one subplan, so the statement plans in a fraction of a millisecond (the six EXISTS
#: it replaces took ~9 ms to plan, more than the claim's other statements together).
_CODENAMES_SQL = """ARRAY(
    SELECT p.codename FROM auth_permission p
    JOIN django_content_type ct ON ct.id = p.content_type_id AND ct.app_label = 'scheduling'
    WHERE p.id IN (
        SELECT up.permission_id FROM scheduling_clinicuserobjectpermission up
        WHERE up.user_id = %s AND up.content_object_id = "scheduling_clinic"."id"
        UNION ALL
        SELECT gp.permission_id FROM scheduling_clinicgroupobjectpermission gp
        JOIN auth_user_groups ug ON ug.group_id = gp.group_id
        WHERE ug.user_id = %s AND gp.content_object_id = "scheduling_clinic"."id"))"""


def clinic_codenames(user_id: int) -> RawSQL:
    """An annotation for a ``Clinic`` queryset: the scheduling permission codenames ``user_id`` holds on each
    clinic, directly or through a group (``text[]``)."""
    return RawSQL(_CODENAMES_SQL, [user_id, user_id])
