"""Same-run A/B of the hold step (issue 42): the waitlist's claim and a delivered notice's record with scheduling's
hold UPDATE spliced into the waitlist's one statement (A, the code before issue 42, its text kept here) against
the split (B, the product: scheduling's ``hold_accept_locked`` / ``hold_extend`` as statements of their own).

``python -m bench.hold_step_ab [N]``: builds its own data in the bench database (``BENCH_DATABASE_URL``, recreated),
makes N OFFERED offers through ``vacancy_dispatch`` for each part, then runs the claims (through ``offer_claim``, in
process) and then the deliveries (``offer_notice_delivered``, the window growing so the hold is extended) one at a
time, alternating A, B, A, B, so both arms share the machine's state; prints each arm's median (p25, p75) and the
median of the differences of adjacent pairs. Not part of ``make bench``: it compares two versions of one step.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import timedelta

from . import db


def _q(xs: list[float]) -> str:
    xs = sorted(xs)
    p25, p75 = xs[len(xs) // 4], xs[3 * len(xs) // 4]
    return f"median {statistics.median(xs):.3f} (p25 {p25:.3f}, p75 {p75:.3f}) n={len(xs)}"


def _claims(n: int) -> None:
    from django.db import connection, transaction
    from psycopg.types.json import Jsonb

    from common.cas import sql_states, transition_sources
    from common.fastpath import prepared_cursor
    from scheduling.models import CapacityHold, Clinic, HoldStatus
    from waitlist.effects import event_logged
    from waitlist.models import EntryStatus, Offer, OfferStatus, WaitlistEntry
    from waitlist.offers import offers as offers_mod

    from .offers import make_offers

    def old_claim_sql() -> str:
        offer_from = sql_states(transition_sources(Offer, OfferStatus.ACCEPTED, OfferStatus.OFFERED))
        entry_from = sql_states(transition_sources(WaitlistEntry, EntryStatus.ACCEPTED, EntryStatus.OFFERED))
        sources = sql_states(transition_sources(CapacityHold, HoldStatus.ACCEPTED, HoldStatus.ACTIVE))
        hold = (
            f"UPDATE scheduling_capacityhold SET status = {sql_states(HoldStatus.ACCEPTED)}, version = version + 1,"
            " expires_at = %(hold_expires)s\n"
            f"    WHERE id = %(hold)s AND status IN ({sources}) AND version = %(hold_version)s"
            " AND EXISTS (SELECT 1 FROM o)\n"
            "      AND EXISTS (SELECT 1 FROM scheduling_capacityallocation a WHERE a.hold_id = %(hold)s AND a.active)\n"
            "    RETURNING id"
        )
        return f"""
    WITH o AS (
        UPDATE waitlist_offer SET status = {sql_states(OfferStatus.ACCEPTED)}, version = version + 1,
            booking_requested_at = %(booking)s
        WHERE id = %(offer)s AND status IN ({offer_from}) AND version = %(offer_version)s
        RETURNING id),
    h AS (
        {hold}),
    e AS (
        UPDATE waitlist_waitlistentry SET status = {sql_states(EntryStatus.ACCEPTED)}, version = version + 1
        WHERE id = %(entry)s AND status IN ({entry_from}) AND version = %(entry_version)s AND EXISTS (SELECT 1 FROM h)
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


    OLD_SQL = old_claim_sql()


    def old_claim_write(locks, *, receipt, booking_requested_at, actor, correlation_id, now):
        offer, hold, entry = locks.offer, locks.hold, locks.entry
        correlation = correlation_id or offer.correlation_id
        params = {
            "booking": booking_requested_at, "offer": offer.pk, "offer_version": offer.version,
            "hold": hold.pk, "hold_version": hold.version, "hold_expires": receipt.hold_expires_at,
            "entry": entry.pk, "entry_version": entry.version, "clinic": offer.clinic_id, "actor": actor,
            "correlation": correlation, "detail": Jsonb({"hold": hold.ref}), "now": now,
            "receipt": receipt.ref, "receipt_expires": receipt.hold_expires_at, "new_version": receipt.offer_version,
            "hold_ref": hold.ref, "key": receipt.idempotency_key, "body": Jsonb(receipt.body),
            "created": receipt.created_at,
        }
        with prepared_cursor(connection) as cursor:
            cursor.execute(OLD_SQL, params)
            row = cursor.fetchone()
        if row is None:
            transaction.set_rollback(True)
            raise RuntimeError("missed")
        receipt.pk, receipt._state.adding = row[0], False
        offer.status, offer.version = OfferStatus.ACCEPTED, offer.version + 1
        hold.status, hold.version, hold.expires_at = HoldStatus.ACCEPTED, hold.version + 1, receipt.hold_expires_at
        entry.status, entry.version = EntryStatus.ACCEPTED, entry.version + 1
        event_logged(offer=offer, from_status=OfferStatus.OFFERED, to_status=OfferStatus.ACCEPTED,
                     reason_code="CLAIMED", actor=actor, correlation_id=correlation)


    new_claim_write = offers_mod.claim_write
    write_s = [0.0]


    def timed(fn):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                write_s[0] = time.perf_counter() - t
        return wrapper


    IMPL = {"A": timed(old_claim_write), "B": timed(new_claim_write)}


    clinics, offers = make_offers("ab", n)
    by_ref = {c.ref: c for c in Clinic.objects.filter(pk__in=[c.pk for c in clinics])}
    versions = dict(Offer.objects.filter(ref__in=[r for _c, r in offers]).values_list("ref", "version"))
    total = {"A": [], "B": []}
    writes = {"A": [], "B": []}
    pairs = []
    for i, (clinic_ref, ref) in enumerate(offers):
        arm = "AB"[i % 2]
        offers_mod.claim_write = IMPL[arm]
        start = time.perf_counter()
        offers_mod.offer_claim(clinic=by_ref[clinic_ref], offer_ref=ref, expected_version=versions[ref],
                               idempotency_key=f"ab-{ref}")
        total[arm].append((time.perf_counter() - start) * 1000)
        writes[arm].append(write_s[0] * 1000)
        if arm == "B":
            pairs.append((total["B"][-1] - total["A"][-1], writes["B"][-1] - writes["A"][-1]))
    ok = {s: Offer.objects.filter(ref__in=[r for _c, r in offers], status=s).count() for s in ("ACCEPTED", "OFFERED")}



    offers_mod.claim_write = new_claim_write
    print(f"claims, A one statement: claim ms {_q(total['A'])}; writes ms {_q(writes['A'])}")
    print(f"claims, B split: claim ms {_q(total['B'])}; writes ms {_q(writes['B'])}")
    print(f"claims, B - A per adjacent pair: claim ms {_q([p[0] for p in pairs])};"
          f" writes ms {_q([p[1] for p in pairs])}")
    print("claims: offers", ok)


def _notices(n: int) -> None:
    from django.db import connection
    from django.utils import timezone

    from common.cas import sql_states
    from common.fastpath import prepared_cursor
    from scheduling.models import HoldStatus
    from waitlist.models import Offer, OfferStatus
    from waitlist.offers import offers as offers_mod

    from .offers import make_offers

    offered = sql_states(OfferStatus.OFFERED)
    hold = (
        "UPDATE scheduling_capacityhold SET version = version + 1, updated_at = %(hold_now)s,"
        " expires_at = %(hold_expires)s\n"
        f"    WHERE id = %(hold)s AND status IN ({sql_states(HoldStatus.ACTIVE)}) AND "
        "EXISTS (SELECT 1 FROM locked WHERE locked.was < %(hold_expires)s)\n    RETURNING id"
    )
    OLD_SQL = f"""
    WITH locked AS (
        SELECT id, expires_at AS was, created_at, correlation_id FROM waitlist_offer
        WHERE id = %(offer)s AND clinic_id = %(clinic)s AND status IN ({offered}) AND notified_at IS NULL
        FOR NO KEY UPDATE),
    h AS (
        {hold}),
    o AS (
        UPDATE waitlist_offer SET notified_at = %(at)s, expires_at = GREATEST(locked.was, %(hold_expires)s),
            version = waitlist_offer.version + 1, updated_at = %(now)s
        FROM locked WHERE waitlist_offer.id = locked.id AND (locked.was >= %(hold_expires)s OR EXISTS (SELECT 1 FROM h))
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
    SELECT (SELECT count(*) FROM locked), (SELECT expires_at FROM o), (SELECT version FROM o),
        (SELECT correlation_id FROM o)
    """


    def old(*, clinic, offer_ref, delivered_at, correlation_id="", deadline, offer):
        now = timezone.now()
        params = {"offer": offer.pk, "clinic": clinic.pk, "at": delivered_at, "now": now, "correlation": correlation_id,
                  "hold": offer.hold_id, "hold_expires": deadline, "hold_now": now}
        with prepared_cursor(connection) as cursor:
            cursor.execute(OLD_SQL, params)
            found, expires_at, version, corr = cursor.fetchone()
        assert expires_at is not None
        offer.notified_at, offer.expires_at, offer.version = delivered_at, expires_at, version
        return offer



    arms = {"A": old, "B": offers_mod.offer_notice_delivered}
    clinics, refs = make_offers("nab", n)
    rows = list(Offer.objects.filter(ref__in=[r for _c, r in refs], notified_at__isnull=True)
                .select_related("clinic").order_by("id"))
    ms: dict[str, list[float]] = {"A": [], "B": []}
    pairs = []
    for i, offer in enumerate(rows):
        arm = "AB"[i % 2]
        start = time.perf_counter()
        arms[arm](clinic=offer.clinic, offer_ref=offer.ref, delivered_at=timezone.now(),
                  deadline=offer.expires_at + timedelta(minutes=5), offer=offer)
        ms[arm].append((time.perf_counter() - start) * 1000)
        if arm == "B":
            pairs.append(ms["B"][-1] - ms["A"][-1])
    done = Offer.objects.filter(pk__in=[o.pk for o in rows], notified_at__isnull=False).count()
    print(f"notices, A one statement: ms {_q(ms['A'])}")
    print(f"notices, B split in one transaction: ms {_q(ms['B'])}")
    print(f"notices, B - A per adjacent pair: ms {_q(pairs)}")
    print("notices: recorded", done, "of", len(rows))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    db.configure_environment()
    db.recreate_database(db.bench_url())
    import django

    django.setup()
    db.forget_cached()
    db.migrate()
    _claims(n)
    _notices(n)


if __name__ == "__main__":
    main()
