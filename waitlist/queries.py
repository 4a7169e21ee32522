"""The waitlist's statements outside the ORM, one typed function each, with why each is raw SQL.

States come from the models' ``TextChoices`` and transition tables (``transition_sources``), formatted from the
enum (``sql_states``: fixed text, so the statement stays one prepared statement) or bound as parameters, never
typed into the text. Scheduling's rows are changed only through scheduling's own functions
(``scheduling.services.holds``, ``scheduling.queries``): no statement here holds another app's text.

- ``offer_claim_write``: the claim's offer, entry, event and receipt in one prepared statement (benchmark 3, "one
  claim alone, in process"); the ORM needs four statements, each compiled per call. The hold's step is scheduling's
  ``hold_accept_locked``, a statement of its own (issue 42: splitting it out cost less than the claims
  benchmark's run-to-run spread, docs/benchmarks.md).
- ``offer_notice_delivered_write``: the offer locked, its window moved and its event, in one prepared statement
  (every offer notice's delivery: benchmark 6, the storm).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from psycopg.types.json import Jsonb

from common.cas import sql_states, transition_sources
from common.fastpath import prepared_cursor
from waitlist.models import EntryStatus, Offer, OfferClaimReceipt, OfferStatus, WaitlistEntry

# --- offers: the claim and a notice's delivery -------------------------------------------------------------------

def _claim_sql() -> str:
    offer_from = sql_states(transition_sources(Offer, OfferStatus.ACCEPTED, OfferStatus.OFFERED))
    entry_from = sql_states(transition_sources(WaitlistEntry, EntryStatus.ACCEPTED, EntryStatus.OFFERED))
    return f"""
WITH o AS (
    UPDATE waitlist_offer SET status = {sql_states(OfferStatus.ACCEPTED)}, version = version + 1,
        booking_requested_at = %(booking)s
    WHERE id = %(offer)s AND status IN ({offer_from}) AND version = %(offer_version)s
    RETURNING id),
e AS (
    UPDATE waitlist_waitlistentry SET status = {sql_states(EntryStatus.ACCEPTED)}, version = version + 1
    WHERE id = %(entry)s AND status IN ({entry_from}) AND version = %(entry_version)s AND EXISTS (SELECT 1 FROM o)
    RETURNING id),
ev AS (
    INSERT INTO waitlist_offerevent
        (clinic_id, offer_id, from_status, to_status, reason_code, actor, correlation_id, detail, created_at)
    SELECT %(clinic)s, %(offer)s, {sql_states(OfferStatus.OFFERED)}, {sql_states(OfferStatus.ACCEPTED)}, 'CLAIMED',
           %(actor)s, %(correlation)s, %(detail)s, %(now)s
    FROM e
    RETURNING id)
INSERT INTO waitlist_offerclaimreceipt
    (ref, clinic_id, offer_id, offer_version, hold_ref, hold_expires_at, idempotency_key, body, created_at)
SELECT %(receipt)s, %(clinic)s, %(offer)s, %(new_version)s, %(hold_ref)s, %(receipt_expires)s, %(key)s, %(body)s,
       %(created)s
FROM e, ev
RETURNING id
"""


_CLAIM_SQL = _claim_sql()


def offer_claim_write(
    *, offer: Offer, entry: WaitlistEntry, receipt: OfferClaimReceipt, booking_requested_at: datetime | None,
    actor: str, correlation_id: str, detail: dict, now: datetime,
) -> int | None:
    """The claim's waitlist writes: offer and entry OFFERED → ACCEPTED at the versions they were locked at, the
    CLAIMED event and the claim receipt, each step only if the one before it changed its row (``cas_update``'s
    compare-and-set, chained). Returns the receipt's id, None when a step missed (nothing of the later steps
    written)."""
    params = {
        "booking": booking_requested_at, "offer": offer.pk, "offer_version": offer.version,
        "entry": entry.pk, "entry_version": entry.version, "clinic": offer.clinic_id, "actor": actor,
        "correlation": correlation_id, "detail": Jsonb(detail), "now": now,
        "receipt": receipt.ref, "receipt_expires": receipt.hold_expires_at, "new_version": receipt.offer_version,
        "hold_ref": receipt.hold_ref, "key": receipt.idempotency_key, "body": Jsonb(receipt.body),
        "created": receipt.created_at,
    }
    with prepared_cursor(connection) as cursor:
        cursor.execute(_CLAIM_SQL, params)
        row = cursor.fetchone()
    return row[0] if row is not None else None


def _notice_delivered_sql() -> str:
    offered = sql_states(OfferStatus.OFFERED)
    return f"""
WITH locked AS (
    SELECT id, expires_at AS was, created_at, correlation_id FROM waitlist_offer
    WHERE id = %(offer)s AND clinic_id = %(clinic)s AND status IN ({offered}) AND notified_at IS NULL
    FOR NO KEY UPDATE),
o AS (
    UPDATE waitlist_offer SET notified_at = %(at)s, expires_at = GREATEST(locked.was, %(deadline)s),
        version = waitlist_offer.version + 1, updated_at = %(now)s
    FROM locked WHERE waitlist_offer.id = locked.id
    RETURNING waitlist_offer.expires_at, waitlist_offer.version, locked.was, locked.created_at,
        locked.correlation_id),
ev AS (
    INSERT INTO waitlist_offerevent
        (clinic_id, offer_id, from_status, to_status, reason_code, actor, correlation_id, detail, created_at)
    SELECT %(clinic)s, %(offer)s, {offered}, {offered}, 'NOTICE_DELIVERED', 'system:notify',
        COALESCE(NULLIF(%(correlation)s, ''), o.correlation_id),
        jsonb_build_object('late_seconds', GREATEST(0, floor(extract(epoch FROM %(at)s - o.created_at)))::int,
                           'expires_at', o.expires_at, 'extended', o.expires_at > o.was),
        %(at)s
    FROM o)
SELECT o.expires_at, o.version, o.correlation_id, o.was FROM o
"""


_NOTICE_DELIVERED_SQL = _notice_delivered_sql()


@dataclass(frozen=True)
class NoticeDelivered:
    """What ``offer_notice_delivered_write`` wrote: the offer's new expiry and version, its correlation id, and
    the expiry it had (``was``: the hold must grow when the new one is later)."""

    expires_at: datetime
    version: int
    correlation_id: str
    was: datetime


def offer_notice_delivered_write(
    *, offer_id: int, clinic_id: int, delivered_at: datetime, deadline: datetime, now: datetime, correlation_id: str,
) -> NoticeDelivered | None:
    """The offer, locked and only while OFFERED and not yet notified: notified at ``delivered_at``, expiring at the
    later of ``deadline`` and its expiry, with its NOTICE_DELIVERED event (detail: late_seconds, expires_at,
    extended). None when the offer was not OFFERED or already notified (nothing written)."""
    params = {"offer": offer_id, "clinic": clinic_id, "at": delivered_at, "deadline": deadline, "now": now,
              "correlation": correlation_id}
    with prepared_cursor(connection) as cursor:
        cursor.execute(_NOTICE_DELIVERED_SQL, params)
        row = cursor.fetchone()
    return NoticeDelivered(*row) if row is not None else None
