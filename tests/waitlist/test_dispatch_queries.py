"""Issue 15 part 4: one dispatch that makes an offer is a bounded number of SQL statements (counted,
not timed), racing dispatcher loops claim different vacancies (``FOR NO KEY UPDATE SKIP LOCKED``), and at most
``WAITLIST_DISPATCH_CONCURRENCY`` background dispatches run at once (dispatch slots).

Counted outside a test transaction (``transaction=True``), as a Celery worker runs it.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.conftest import race, seoul
from tests.support.slots import queued_for_a_slot, slot_held_elsewhere
from waitlist import services
from waitlist.dispatch import vacancies as vacancy_commands
from waitlist.models import Offer, OfferStatus, Vacancy

pytestmark = pytest.mark.django_db(transaction=True)

# 32 before issue 15 part 4, 22 after its first pass, 13 after issue 15 target 4 ("Dispatch"), 12 since issue 42
# read the page's decisions with it: the vacancy, the flag, the policy, the matcher's first page (both slot-fit
# tiers) with its candidates' decisions, then under the fence
# (BEGIN … COMMIT): the vacancy lock, one entry statement (the first free entry of the page's rest locked, with
# its patient, the eligibility re-check and the patient's recent sends for the contact cap), the hold with its
# allocation in their savepoint, and one statement for the offer, its event, its notice and the entry's and
# vacancy's compare-and-set. Plus the dispatch slot taken before and given back after (``DISPATCH_SLOTS``).
MAX_DISPATCH_STATEMENTS = 14
#: Each further vacancy a dispatcher loop offers: the claim (which returns the vacancy and releases the previous
#: claim), the page with its decisions, and the 7 statements under the fence. The flag, the clinic and its policy are
#: read once per loop.
LOOP_STATEMENTS_PER_OFFER = 10


def _listing(queries) -> str:
    return "\n".join(f"{i + 1:2}. {q['sql'][:300]}" for i, q in enumerate(queries))


def _vacancies(world, n: int) -> list[Vacancy]:
    out = []
    for i in range(n):
        world.waiting(practitioner=world.doctor)
        appointment = world.confirmed(seoul(3, 9 + i))
        _, vacancy = services.appointment_cancel_with_vacancy(
            clinic=world.clinic, appointment_ref=appointment.ref, reason="x"
        )
        out.append(vacancy)
    return out


def test_one_dispatch_that_makes_an_offer_is_bounded_in_statements(world):
    (vacancy,) = _vacancies(world, 1)
    with CaptureQueriesContext(connection) as captured:
        result = services.vacancy_dispatch_by_id(vacancy_id=vacancy.pk)
    assert result.outcome == "OFFERED" and result.offer.status == OfferStatus.OFFERED
    assert len(captured) <= MAX_DISPATCH_STATEMENTS, (
        f"{len(captured)} statements for one dispatch:\n{_listing(captured.captured_queries)}"
    )
    locking = [q["sql"] for q in captured.captured_queries if "FOR NO KEY UPDATE" in q["sql"]]
    assert len(locking) == 2, _listing(captured.captured_queries)  # the vacancy fence, then the entry


def test_the_dispatcher_loop_makes_each_further_offer_in_eleven_statements(world, monkeypatch):
    """Counted as the contention benchmark's dispatchers run: the loop over a list of vacancies."""
    from waitlist.dispatch import vacancies as vacancies_module

    # The loop hands its dispatch slot back every DISPATCH_TURN_SECONDS of wall time (two statements): on a busy
    # machine four offers can outlast one turn. This test counts statements per offer, not per turn.
    monkeypatch.setattr(vacancies_module, "DISPATCH_TURN_SECONDS", 600.0)
    vacancies = _vacancies(world, 5)
    counts = []
    for batch in (vacancies[:1], vacancies[1:]):
        with CaptureQueriesContext(connection) as captured:
            results = dict(services.vacancies_dispatch(vacancy_ids=[v.pk for v in batch]))
        assert [r.outcome for r in results.values()] == ["OFFERED"] * len(batch)
        counts.append(len(captured))
        policy_reads = [q for q in captured.captured_queries if q["sql"].startswith('SELECT "waitlist_waitlistpolicy"')]
        assert len(policy_reads) == 1, _listing(captured.captured_queries)  # once per loop, not per vacancy
    further = (counts[1] - counts[0]) / 3  # four offers in the second loop, one in the first
    assert further <= LOOP_STATEMENTS_PER_OFFER, (counts, further)
    assert Offer.objects.filter(status=OfferStatus.OFFERED).count() == 5
    assert not Vacancy.objects.filter(dispatch_claimed_until__isnull=False).exists()  # every claim released


def test_a_loop_passes_over_a_vacancy_another_loop_holds(world, frozen_clock):
    """Another connection holds vacancy A's claim (its transaction open): the loop dispatches B only. Once
    that claim is committed it still keeps loops off A until it lapses; then A is dispatched."""
    first, second = _vacancies(world, 2)
    ids = [first.pk, second.pk]
    claimed, release, done = threading.Event(), threading.Event(), threading.Event()

    def other_loop() -> None:
        try:
            with transaction.atomic():
                assert vacancy_commands._claim(ids, after=0, now=timezone.now(),
                                               until=timezone.now() + timedelta(minutes=1))[0].pk == first.pk
                claimed.set()
                release.wait(timeout=30)
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=other_loop)
    thread.start()
    assert claimed.wait(timeout=30)
    dispatched = dict(services.vacancies_dispatch(vacancy_ids=ids))  # A's row is locked: SKIP LOCKED
    assert list(dispatched) == [second.pk] and dispatched[second.pk].outcome == "OFFERED"
    release.set()
    assert done.wait(timeout=30)
    thread.join()
    assert list(services.vacancies_dispatch(vacancy_ids=ids)) == []  # A's committed claim is still live
    frozen_clock.shift(timedelta(minutes=1, seconds=1))
    dispatched = dict(services.vacancies_dispatch(vacancy_ids=ids))
    assert list(dispatched) == [first.pk] and dispatched[first.pk].outcome == "OFFERED"


def test_racing_loops_each_take_different_vacancies(world):
    vacancies = _vacancies(world, 6)
    ids = [v.pk for v in vacancies]
    loops = 4
    results = race(lambda i: list(services.vacancies_dispatch(vacancy_ids=ids[i:] + ids[:i])), loops)
    assert not [r for r in results if isinstance(r, BaseException)], results
    taken = [vacancy_id for r in results for vacancy_id, _result in r]
    assert sorted(taken) == sorted(ids), taken  # every vacancy dispatched by exactly one loop
    assert {res.outcome for r in results for _id, res in r} == {"OFFERED"}
    assert Offer.objects.filter(status=OfferStatus.OFFERED).count() == len(ids)
    assert not Vacancy.objects.filter(dispatch_claimed_until__isnull=False).exists()  # every claim released


@pytest.mark.race
def test_entries_held_by_racers_are_passed_over_in_one_lock_statement(world):
    """Another connection holds the first two candidates' rows (racing dispatchers promoting them): one
    locking statement takes the third, and both held ones are noted ENTRY_LOCKED (one note each)."""
    import psycopg

    from waitlist.models import DispatchNote

    busy = [world.waiting(practitioner=world.doctor, waiting_since=seoul(1, 7 + i)) for i in range(2)]
    free = world.waiting(practitioner=world.doctor, waiting_since=seoul(1, 9))
    appointment = world.confirmed(seoul(3, 9))
    _, vacancy = services.appointment_cancel_with_vacancy(clinic=world.clinic, appointment_ref=appointment.ref,
                                                          reason="x")
    dsn = connection.settings_dict
    with psycopg.connect(host=dsn["HOST"], port=dsn["PORT"] or 5432, user=dsn["USER"], dbname=dsn["NAME"],
                         password=dsn["PASSWORD"] or None) as holder:
        holder.execute("SELECT 1 FROM waitlist_waitlistentry WHERE id = ANY(%s) FOR NO KEY UPDATE",
                       [[e.pk for e in busy]])
        with CaptureQueriesContext(connection) as captured:
            result = services.vacancy_dispatch_by_id(vacancy_id=vacancy.pk)
        holder.rollback()
    assert result.outcome == "OFFERED" and result.offer.entry_id == free.pk
    locking = [q["sql"] for q in captured.captured_queries if "FOR NO KEY UPDATE" in q["sql"]]
    assert len(locking) == 2, _listing(captured.captured_queries)  # the fence, then one entry statement
    notes = DispatchNote.objects.filter(vacancy=vacancy, reason_code="ENTRY_LOCKED")
    assert sorted(notes.values_list("entry_id", flat=True)) == sorted(e.pk for e in busy)


@pytest.mark.fastpaths
def test_the_loops_fixed_statements_run_prepared_once_per_connection(world):
    """Issue 15: planning dispatch's statements cost more than running them, so the fixed-text ones run as
    server-side prepared statements (``common.fastpath``): parsed once per connection, and planned once when
    PostgreSQL's generic plan is as good. Seven offers in one loop: each statement is one prepared statement
    of this connection (psycopg prepares one per parameter types: a NULL parameter, e.g. the first claim's nothing
    to release, is a second one), run for every offer."""
    vacancies = _vacancies(world, 7)
    connection.close()  # a new connection: only this loop's statements are prepared on it
    results = dict(services.vacancies_dispatch(vacancy_ids=[v.pk for v in vacancies]))
    assert [r.outcome for r in results.values()] == ["OFFERED"] * 7
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE NOT from_sql")
        prepared = cursor.fetchall()
    statements = {
        "claim": "SET dispatch_claimed_until = $",
        "first pages": "UNION ALL",
        "decisions": "FROM waitlist_bookingreliabilitydecision d",
        "fence": 'FOR NO KEY UPDATE OF "waitlist_vacancy"',
        "entry lock": "FOR NO KEY UPDATE OF e SKIP LOCKED",
        "hold": "INSERT INTO scheduling_capacityallocation",
        "offer write": "INSERT INTO waitlist_offerevent",
    }
    for name, fragment in statements.items():
        matching = [(generic, custom) for text, generic, custom in prepared if fragment in text]
        assert 1 <= len(matching) <= 2, (name, [text[:200] for text, _g, _c in prepared])
        assert sum(map(sum, matching)) >= 7, (name, matching)  # every offer ran it (generic_plans + custom_plans)


# --- dispatch slots (``DISPATCH_SLOTS``): at most WAITLIST_DISPATCH_CONCURRENCY background dispatches at once ---


@pytest.fixture
def one_slot(settings):
    settings.WAITLIST_DISPATCH_CONCURRENCY = 1
    settings.WAITLIST_DISPATCH_SLOT_WAIT_SECONDS = 30


@pytest.mark.fastpaths
def test_a_dispatch_task_waits_for_a_free_slot(world, one_slot):
    (vacancy,) = _vacancies(world, 1)
    _got, release, done = slot_held_elsewhere(vacancy_commands.DISPATCH_SLOTS)
    outcome: list = []
    task = threading.Thread(target=lambda: (
        outcome.append(services.vacancy_dispatch_by_id(vacancy_id=vacancy.pk).outcome), connection.close()))
    task.start()
    try:
        assert queued_for_a_slot(vacancy_commands.DISPATCH_SLOTS)
        assert not Offer.objects.filter(vacancy=vacancy).exists()  # nothing done while it waits
    finally:
        release.set()
    task.join(timeout=30)
    assert outcome == ["OFFERED"]
    assert done.wait(timeout=30)


def test_a_dispatch_that_gets_no_slot_in_time_still_offers(world, one_slot, settings):
    """A slot is throughput, never correctness: after the wait the dispatch runs without one."""
    settings.WAITLIST_DISPATCH_SLOT_WAIT_SECONDS = 0.05
    (vacancy,) = _vacancies(world, 1)
    _got, release, done = slot_held_elsewhere(vacancy_commands.DISPATCH_SLOTS)
    try:
        assert services.vacancy_dispatch_by_id(vacancy_id=vacancy.pk).outcome == "OFFERED"
    finally:
        release.set()
        assert done.wait(timeout=30)


@pytest.mark.fastpaths
def test_a_loop_lets_a_waiting_task_go_first_at_the_end_of_its_turn(world, one_slot, monkeypatch):
    monkeypatch.setattr(vacancy_commands, "DISPATCH_TURN_SECONDS", 0)  # every vacancy is a turn
    first, second, other = _vacancies(world, 3)
    loop = services.vacancies_dispatch(vacancy_ids=[first.pk, second.pk])
    assert next(loop)[0] == first.pk  # the loop holds the slot
    task = threading.Thread(target=lambda: (services.vacancy_dispatch_by_id(vacancy_id=other.pk),
                                            connection.close()))
    task.start()
    assert queued_for_a_slot(vacancy_commands.DISPATCH_SLOTS)
    vacancy_id, result = next(loop)  # the turn ended: the task took the slot, the loop waited its turn
    task.join(timeout=30)
    assert (vacancy_id, result.outcome) == (second.pk, "OFFERED")
    offered_first = Offer.objects.filter(vacancy__in=[other, second]).order_by("pk").values_list("vacancy", flat=True)
    assert list(offered_first) == [other.pk, second.pk]


def test_a_loop_gives_its_slot_back_also_when_left_early(world):
    first, second = _vacancies(world, 2)
    loop = services.vacancies_dispatch(vacancy_ids=[first.pk, second.pk])
    next(loop)
    loop.close()  # the caller left the loop
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        assert cursor.fetchone()[0] == 0
    assert not Vacancy.objects.filter(dispatch_claimed_until__isnull=False).exists()


def test_a_dispatch_a_person_asked_for_never_waits_for_a_slot(world, one_slot):
    (vacancy,) = _vacancies(world, 1)
    _got, release, done = slot_held_elsewhere(vacancy_commands.DISPATCH_SLOTS)
    try:
        with CaptureQueriesContext(connection) as captured:
            result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
        assert result.outcome == "OFFERED"
        assert not [q for q in captured.captured_queries if "advisory" in q["sql"]]
    finally:
        release.set()
        assert done.wait(timeout=30)
