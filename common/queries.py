"""Common's statements outside the ORM, one typed function each, with why each is raw SQL.

States come from the models' enums (``OutboxStatus``, ``DeliveryOutcome``), formatted into the text once at
import, so each statement's text stays fixed (a prepared statement is planned once per connection) and the
planner still sees constants.

- ``receipt_insert``: ``INSERT … ON CONFLICT (scope, key) DO NOTHING RETURNING ref`` tells in one round trip
  whether this caller owns the key (the ORM's ``bulk_create(ignore_conflicts=True)`` cannot say); prepared,
  every idempotent command runs it (benchmark 3, claims: the "receipt" row of the per-layer table).
- ``receipt_store``: the ORM's own UPDATE of the stored answer, as fixed text on a prepared cursor instead of a
  queryset compiled per request (benchmark 3, claims: the "receipt" row).
- ``outbox_recent_sends`` (through ``recent_sends_function_ddl``'s ``cw_recent_sends``, the SQL function
  another app's statement calls by name in the same round trip instead of splicing common's text): the contact
  cap's recent sends, prepared, read on every notice's delivery (benchmark 6, the storm: "the contact cap's …
  reads prepared", 12 → 6 statements a notice).
- ``outbox_lease_rows``: lease in one statement (``UPDATE … WHERE id IN (SELECT … FOR NO KEY UPDATE SKIP
  LOCKED) RETURNING``; the ORM needs a locking read and an update, five statements before; benchmark 6, the
  storm: 33.6 → 36.1 notices/s together with ``outbox_attempt_finish``).
- ``outbox_attempt_finish``: the fenced write-back and its attempt row in one prepared statement (a CTE with an
  UPDATE and an INSERT; four statements through the ORM; benchmark 6, as above).
- ``advisory_slot_*``: PostgreSQL's advisory-lock functions and ``pg_locks``, which the ORM has no words for
  (benchmark 2, contention: the dispatch slots).
- ``short_code_*_ddl``: the short codes' picker function and insert trigger (DDL, run by scheduling's migration
  0012 and waitlist's 0016 through ``common.shortcodes``).
- ``wal_written`` and ``wal_replayed``: PostgreSQL's WAL positions (``pg_current_wal_insert_lsn()`` on the primary,
  ``pg_last_wal_replay_lsn()`` on a standby), which the ORM has no words for: replica reads' lag bound
  (``common.replica``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, connections

from .fastpath import prepared_cursor
from .models import DeliveryOutcome, OutboxMessage, OutboxStatus

_PENDING, _LEASED, _SENT = OutboxStatus.PENDING.value, OutboxStatus.LEASED.value, OutboxStatus.SENT.value

# --- idempotency receipts (common.idempotency) ---

_RECEIPT_INSERT_SQL = (
    "INSERT INTO common_commandreceipt (ref, scope, key, command, request_digest,"
    " status_code, response_body, created_at)"
    " VALUES (%s, %s, %s, %s, %s, 0, '', now())"
    " ON CONFLICT (scope, key) DO NOTHING RETURNING ref"
)
_RECEIPT_STORE_SQL = (
    'UPDATE "common_commandreceipt" SET "status_code" = %s, "response_body" = %s'
    ' WHERE "common_commandreceipt"."ref" = %s'
)


def receipt_insert(*, ref: str, scope: str, key: str, command: str, digest: str) -> str | None:
    """Insert an empty receipt for (scope, key): ``ref`` when this caller inserted it, None when one exists.
    Blocks behind an uncommitted first caller with the same key."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(_RECEIPT_INSERT_SQL, [ref, scope, key, command, digest])
        row = cursor.fetchone()
    return None if row is None else row[0]


def receipt_store(ref: str, *, status_code: int, body: str) -> None:
    """Store the command's answer on its receipt."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(_RECEIPT_STORE_SQL, [status_code, body, ref])


# --- the contact cap (common.notify) ---

#: The sends that count against a recipient's daily cap, oldest first: common's SQL function
#: ``cw_recent_sends(recipient, since, limit)``, so another app's statement may ask it by name in the same round
#: trip (promotion's entry lock does) without holding common's text. Installed by ``recent_sends_function_ddl``.
_RECENT_SENDS_SQL = "SELECT cw_recent_sends(%(recipient)s, %(cap_since)s, %(cap_limit)s)"


def recent_sends_function_ddl() -> str:
    """``cw_recent_sends``: PL/pgSQL so its plan is cached per session; STABLE, so it reads the calling
    statement's snapshot."""
    return f"""
CREATE OR REPLACE FUNCTION cw_recent_sends(recipient text, since timestamptz, lim integer)
RETURNS timestamptz[] AS $$
BEGIN
  RETURN ARRAY(SELECT o.sent_at FROM common_outboxmessage o
               WHERE o.recipient_ref = recipient AND o.status = '{_SENT}' AND o.sent_at > since
               ORDER BY o.sent_at LIMIT lim);
END
$$ LANGUAGE plpgsql STABLE;
"""


RECENT_SENDS_FUNCTION_DROP = "DROP FUNCTION IF EXISTS cw_recent_sends(text, timestamptz, integer)"


def outbox_recent_sends(recipient_ref: str, *, since: datetime, limit: int) -> list[datetime]:
    """Send times of the recipient's SENT messages after ``since``, oldest first, at most ``limit``."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(_RECENT_SENDS_SQL, {"recipient": recipient_ref, "cap_since": since, "cap_limit": limit})
        (sent,) = cursor.fetchone()
    return list(sent)


# --- outbox delivery (common.outbox) ---

_LEASE_SQL = f"""
UPDATE common_outboxmessage AS m
SET status = '{_LEASED}', lease_owner = %(worker)s, lease_expires_at = %(until)s, attempts = m.attempts + 1,
    version = m.version + 1
WHERE m.id IN (
    SELECT id FROM common_outboxmessage
    WHERE ((status = '{_PENDING}' AND (next_attempt_at IS NULL OR next_attempt_at <= %(now)s))
           OR (status = '{_LEASED}' AND lease_expires_at < %(now)s))
      AND topic = ANY(%(topics)s) {{mine}}
    ORDER BY created_at, id
    LIMIT %(limit)s
    FOR NO KEY UPDATE SKIP LOCKED)
RETURNING m.*
"""
_LEASE_ALL_SQL = _LEASE_SQL.format(mine="")
_LEASE_MINE_SQL = _LEASE_SQL.format(mine="AND aggregate_ref = %(ref)s")


def outbox_lease_rows(*, worker: str, until: datetime, now: datetime, topics: list[str], limit: int,
                      aggregate_ref: str | None = None) -> list[OutboxMessage]:
    """Lease up to ``limit`` due PENDING rows and rows whose lease expired before ``now`` (of ``topics``; with
    ``aggregate_ref`` only that aggregate's), oldest first by the lock's order; the rows as leased."""
    params = {"worker": worker, "until": until, "now": now, "topics": topics, "limit": limit, "ref": aggregate_ref}
    sql = _LEASE_ALL_SQL if aggregate_ref is None else _LEASE_MINE_SQL
    return list(OutboxMessage.objects.raw(sql, params))


_FINISH_SQL = f"""
WITH fenced AS (
    UPDATE common_outboxmessage
    SET lease_owner = '', lease_expires_at = NULL, version = version + 1, status = %(status)s,
        last_error_code = %(error)s, attempts = attempts - %(give_back)s,
        next_attempt_at = CASE WHEN %(next_set)s THEN %(next)s ELSE next_attempt_at END,
        sent_at = COALESCE(%(sent_at)s, sent_at)
    WHERE id = %(id)s AND status = '{_LEASED}' AND lease_owner = %(worker)s AND attempts = %(attempt)s
    RETURNING id),
attempt AS (
    INSERT INTO common_outboxattempt
        (message_id, attempt, worker, outcome, error_code, provider, started_at, finished_at)
    SELECT %(id)s, %(attempt)s, %(worker)s,
           CASE WHEN EXISTS (SELECT FROM fenced) THEN %(outcome)s ELSE '{DeliveryOutcome.FENCED.value}' END,
           CASE WHEN EXISTS (SELECT FROM fenced) THEN %(code)s ELSE 'LEASE_LOST' END,
           %(provider)s, %(started)s, %(finished)s
    ON CONFLICT ON CONSTRAINT outbox_attempt_once DO NOTHING)
SELECT count(*) FROM fenced
"""


def outbox_attempt_finish(*, message_id: int, worker: str, attempt: int, status: str, error: str, give_back: bool,
                          next_attempt_at: datetime | None, sent_at: datetime | None, outcome: str, code: str,
                          provider: str, started_at: datetime, finished_at: datetime) -> bool:
    """Write a finished attempt back under the lease's fence (the message still LEASED by ``worker`` at
    ``attempt``): lease released, ``status``, ``error``, the attempt given back, ``next_attempt_at`` when set,
    ``sent_at`` when set; with its attempt row, whose first writer stands (``outbox_attempt_once``). False when
    the fence failed: the attempt is then recorded FENCED / LEASE_LOST."""
    params: dict[str, Any] = {
        "id": message_id, "worker": worker, "attempt": attempt, "status": status, "error": error,
        "give_back": int(give_back), "next_set": next_attempt_at is not None, "next": next_attempt_at,
        "sent_at": sent_at, "outcome": outcome, "code": code, "provider": provider, "started": started_at,
        "finished": finished_at}
    with prepared_cursor(connection) as cursor:
        cursor.execute(_FINISH_SQL, params)
        (updated,) = cursor.fetchone()
    return updated == 1


# --- dispatch slots (common.fastpath.Semaphore) ---

# The first of slots start, start+1, … (mod size) that nobody holds, taken; none when all are held. The
# function scan yields one slot at a time and LIMIT 1 stops at the first lock taken (no lock is taken and lost).
_SLOT_TAKE_FREE_SQL = """
SELECT s FROM (SELECT (g + %(start)s) %% %(size)s AS s FROM generate_series(0, %(size)s - 1) AS g) AS slots
WHERE pg_try_advisory_lock(%(key)s, s) LIMIT 1
"""
# Queue for one slot, for at most ``lock_timeout`` (set for this transaction only, before the lock is asked for).
_SLOT_WAIT_SQL = "SELECT set_config('lock_timeout', %s, true), pg_advisory_lock(%s, %s)"
_SLOT_RELEASE_SQL = "SELECT pg_advisory_unlock(%s, %s)"
# A two-key advisory lock shows in pg_locks as classid = first key, objid = second, objsubid = 2.
_SLOT_USAGE_SQL = """
SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 2 AND classid = (%s::int4)::oid AND database = (
    SELECT oid FROM pg_database WHERE datname = current_database())
"""


def advisory_slot_take_free(key: int, *, start: int, size: int) -> int | None:
    """Take the first free slot of ``key`` from ``start`` on (session lock), or None when all are held."""
    with prepared_cursor(connection) as cursor:
        cursor.execute(_SLOT_TAKE_FREE_SQL, {"start": start, "size": size, "key": key})
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def advisory_slot_wait(key: int, slot: int, *, timeout_ms: int) -> None:
    """Queue for ``slot`` of ``key`` for at most ``timeout_ms`` (inside the caller's transaction, whose
    ``lock_timeout`` it sets); raises ``DatabaseError`` when it did not come free in time."""
    with connection.cursor() as cursor:
        cursor.execute(_SLOT_WAIT_SQL, [f"{timeout_ms}ms", key, slot])


def advisory_slot_release(key: int, slot: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_SLOT_RELEASE_SQL, [key, slot])


def advisory_slot_usage(key: int) -> tuple[int, int]:
    """(slots of ``key`` held, connections waiting for one) across the deployment's database."""
    with connection.cursor() as cursor:
        cursor.execute(_SLOT_USAGE_SQL, [key])
        held, waiting = cursor.fetchone()
    return int(held), int(waiting)


# --- short codes' picker and trigger (DDL for the migrations, through common.shortcodes) ---


def short_code_functions_ddl(alphabet: str) -> str:
    """``cw_short_code_pick(tbl, clinic)`` (a random code from ``alphabet`` not yet used in the clinic, 4
    characters growing to 8 when crowded) and the trigger function ``cw_short_code_fill()``."""
    return f"""
CREATE OR REPLACE FUNCTION cw_short_code_pick(tbl text, clinic bigint) RETURNS text AS $$
DECLARE
  alphabet constant text := '{alphabet}';
  len int := 4;
  tries int := 0;
  bytes bytea;
  candidate text;
  taken boolean;
BEGIN
  LOOP
    bytes := uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid());
    candidate := '';
    FOR i IN 0..len - 1 LOOP
      candidate := candidate || substr(alphabet, 1 + get_byte(bytes, i) % {len(alphabet)}, 1);
    END LOOP;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE clinic_id = $1 AND code = $2)', tbl)
      INTO taken USING clinic, candidate;
    IF NOT taken THEN
      RETURN candidate;
    END IF;
    tries := tries + 1;
    IF tries % 8 = 0 AND len < 8 THEN
      len := len + 1;
    END IF;
  END LOOP;
END
$$ LANGUAGE plpgsql VOLATILE;

CREATE OR REPLACE FUNCTION cw_short_code_fill() RETURNS trigger AS $$
BEGIN
  IF NEW.code IS NULL OR NEW.code = '' THEN
    NEW.code := cw_short_code_pick(TG_TABLE_NAME, NEW.clinic_id);
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
"""


def short_code_trigger_ddl(table: str) -> str:
    """Give ``table``'s new rows a code, and its existing rows one each (the backfill)."""
    return f"""
CREATE TRIGGER {table}_short_code BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION cw_short_code_fill();
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT id, clinic_id FROM {table} WHERE code = '' ORDER BY id LOOP
    UPDATE {table} SET code = cw_short_code_pick('{table}', r.clinic_id) WHERE id = r.id;
  END LOOP;
END
$$;
"""


def short_code_trigger_drop_ddl(table: str) -> str:
    return f"DROP TRIGGER IF EXISTS {table}_short_code ON {table};"


# --- replica reads' lag bound (common.replica) ---


def wal_written(alias: str) -> int:
    """The WAL position ``alias`` (the primary) has inserted up to, as a byte count: every commit acknowledged before
    this call is at or before it. The insert position, not ``pg_current_wal_lsn()`` (what is written out): with
    ``synchronous_commit`` off a commit is acknowledged before its record is written."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
        return int(cursor.fetchone()[0])


def wal_replayed(alias: str) -> tuple[bool, int | None]:
    """(in recovery, the WAL position replayed as a byte count) of ``alias``: a standby replays up to there; a server
    not in recovery is a primary (``target_session_attrs=prefer-standby`` found no standby) and lags nothing."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn() - '0/0'::pg_lsn")
        in_recovery, replayed = cursor.fetchone()
    return bool(in_recovery), None if replayed is None else int(replayed)
