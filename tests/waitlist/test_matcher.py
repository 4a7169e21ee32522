"""The matcher: hard eligibility in SQL, deterministic keyset order, bounded pages, batched decisions."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection

from scheduling.models import AppointmentStatus
from tests import factories as f
from tests.conftest import seoul
from tests.waitlist.factories import NOW, WaitlistEntryFactory, decide
from tests.worlds import waitlist_world
from waitlist import services
from waitlist.dispatch import matcher
from waitlist.models import DecisionStatus, Offer, Vacancy, WaitlistEntry
from waitlist.reliability.feed import StoredDecisionProvider


def vacancy_for(world, starts_at=None, *, resource=None, excluded=None):
    starts_at = starts_at or seoul(3, 10)
    return Vacancy.objects.create(
        vacancy_key=f"test:{starts_at.isoformat()}:{Vacancy.objects.count()}",
        clinic=world.clinic,
        tenant_group=world.clinic.tenant_group,
        practitioner=world.doctor,
        treatment=world.treatment,
        resource=resource,
        starts_at=starts_at,
        ends_at=starts_at + timedelta(minutes=30),
        excluded_patient=excluded,
    )


def ranked(world, vacancy, **policy_fields):
    policy = services.policy_current(clinic=world.clinic)
    for name, value in policy_fields.items():
        setattr(policy, name, value)
    stats = matcher.MatchStats()
    found = list(
        matcher.candidates(
            vacancy=vacancy, policy=policy, provider=StoredDecisionProvider(), now=NOW, stats=stats
        )
    )
    return [c.entry_id for c in found], stats, found


def test_order_is_slot_fit_then_priority_then_waiting_since_then_id(world):
    t0 = NOW - timedelta(days=10)
    any_old = world.waiting(waiting_since=t0)
    any_vip = world.waiting(priority_rank=9, waiting_since=t0 + timedelta(days=1))
    named_new = world.waiting(practitioner=world.doctor, waiting_since=t0 + timedelta(days=5))
    named_vip = world.waiting(
        practitioner=world.doctor, priority_rank=9, waiting_since=t0 + timedelta(days=6)
    )
    tie_a = world.waiting(waiting_since=t0 + timedelta(days=2))
    tie_b = world.waiting(waiting_since=t0 + timedelta(days=2))
    ids, stats, found = ranked(world, vacancy_for(world))
    assert ids == [named_vip.pk, named_new.pk, any_vip.pk, any_old.pk, tie_a.pk, tie_b.pk]
    assert [c.slot_fit for c in found] == [1, 1, 0, 0, 0, 0]
    assert stats.exhausted


def test_hard_eligibility_filters_in_sql(world):
    cancelling = world.patient()
    fits = world.waiting(waiting_since=NOW - timedelta(days=1))
    world.waiting(practitioner=world.other_doctor)  # another doctor
    world.waiting(treatment=world.other_treatment)  # another treatment
    world.waiting(earliest=seoul(3, 10, 30))  # window starts after the slot starts
    world.waiting(latest=seoul(3, 10, 15))  # window ends before the slot ends
    world.waiting(resource_kind="XRAY")  # needs a resource the vacancy lacks
    world.waiting(cancelling)  # the cancelling patient
    world.waiting(suppressed_until=NOW + timedelta(hours=1))  # suppressed after a decline
    world.waiting(status="WITHDRAWN")
    elsewhere = waitlist_world()  # another tenant's clinic with a same-named setup
    WaitlistEntryFactory(clinic=elsewhere.clinic, treatment=elsewhere.treatment)
    exact = world.waiting(earliest=seoul(3, 10), latest=seoul(3, 10, 30))  # the window is inclusive
    ids, _, _ = ranked(world, vacancy_for(world, excluded=cancelling))
    assert ids == [fits.pk, exact.pk]


def test_resource_need_matches_the_vacancy_resource_kind(world):
    room = f.ResourceFactory(clinic=world.clinic, kind="XRAY")
    needs = world.waiting(resource_kind="XRAY")
    ids, _, _ = ranked(world, vacancy_for(world, resource=room))
    assert ids == [needs.pk]


def test_window_dates_are_read_in_the_clinic_zone(world, staff_api):
    """Date-only windows mean the clinic's local day: Dec 3 in Seoul is Dec 2 15:00Z .. Dec 3 15:00Z."""
    patient = world.patient()
    response = staff_api.post(
        f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/",
        {
            "patient": patient.ref,
            "treatment": world.treatment.ref,
            "earliest": "2030-12-03",
            "latest": "2030-12-03",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["earliest"] == "2030-12-03T00:00:00+09:00"
    assert response.json()["latest"] == "2030-12-04T00:00:00+09:00"
    decide(patient)
    entry = WaitlistEntry.objects.get(ref=response.json()["ref"])
    assert ranked(world, vacancy_for(world, seoul(3, 0)))[0] == [entry.pk]  # 00:00 local fits
    assert ranked(world, vacancy_for(world, seoul(3, 23, 30)))[0] == [entry.pk]  # ends at 24:00
    assert ranked(world, vacancy_for(world, seoul(2, 23, 45)))[0] == []  # starts the day before


def test_already_offered_and_weekly_cap_are_excluded(world):
    entry = world.waiting()
    vacancy = vacancy_for(world)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"
    services.offer_decline(clinic=world.clinic, offer_ref=Offer.objects.get().ref)
    WaitlistEntry.objects.filter(pk=entry.pk).update(suppressed_until=None)
    assert ranked(world, vacancy)[0] == []  # already offered this vacancy
    other = vacancy_for(world, seoul(4, 10))
    assert ranked(world, other)[0] == [entry.pk]
    assert ranked(world, other, weekly_offer_cap=1)[0] == []  # one offer this week already
    assert ranked(world, other, weekly_offer_cap=None)[0] == [entry.pk]


def test_keyset_pages_cover_every_candidate_once_in_order(world, django_assert_max_num_queries):
    entries = [
        world.waiting(priority_rank=i % 3, waiting_since=NOW - timedelta(minutes=i % 5)) for i in range(23)
    ]
    entries += [world.waiting(practitioner=world.doctor, priority_rank=i % 2) for i in range(4)]
    expected = sorted(
        entries,
        key=lambda e: (-(e.practitioner_id == world.doctor.pk), -e.priority_rank, e.waiting_since, e.pk),
    )
    vacancy = vacancy_for(world)
    services.policy_current(clinic=world.clinic)  # version 1 exists before counting
    # 4 named entries in 1 short page, 23 others in 5 pages: one query per page, one decision
    # batch per page (never one per candidate), and the policy read.
    with django_assert_max_num_queries(6 + 6 + 1):
        ids, stats, found = ranked(world, vacancy, page_size=5)
    assert ids == [e.pk for e in expected]
    assert all(c.decision is not None for c in found)
    assert stats.pages == 6


def test_a_tiers_first_page_is_read_as_a_probe_then_its_rest_as_the_same_page(world):
    entries = [world.waiting(waiting_since=NOW - timedelta(minutes=i)) for i in range(30)]
    vacancy = vacancy_for(world)
    policy = services.policy_current(clinic=world.clinic)
    policy.page_size = 20
    stats = matcher.MatchStats()
    pages = [[c.entry_id for c in page] for page in matcher.candidate_pages(
        vacancy=vacancy, policy=policy, provider=StoredDecisionProvider(), now=NOW, stats=stats)]
    assert [len(p) for p in pages] == [matcher.PROBE_ROWS, 20 - matcher.PROBE_ROWS, 10]
    assert sum(pages, []) == [e.pk for e in reversed(entries)]  # the longest waiting first, each once
    assert stats.pages == 1 + 2 and stats.exhausted  # the empty named tier, then two pages of 20


def test_the_pages_budget_counts_a_probed_page_once(world):
    for _ in range(30):
        world.waiting()
    ids, stats, _ = ranked(world, vacancy_for(world), page_size=20, max_pages=2)
    assert len(ids) == 20 and stats.budget_hit == "PAGES"  # tier 1 (empty) took one page, tier 2 one of 20


def test_budgets_bound_the_scan(world):
    for _ in range(12):
        world.waiting()
    vacancy = vacancy_for(world)
    ids, stats, _ = ranked(world, vacancy, page_size=5, max_candidates=7)
    assert len(ids) == 7 and stats.budget_hit == "CANDIDATES" and not stats.exhausted
    ids, stats, _ = ranked(world, vacancy, page_size=3, max_pages=2)
    assert len(ids) == 3 and stats.budget_hit == "PAGES"  # tier 1 (empty) took one page


def test_time_budget_stops_matching(world):
    for _ in range(4):
        world.waiting()
    policy = services.policy_current(clinic=world.clinic)
    policy.page_size = 1
    ticks = iter(range(0, 100_000, 1))  # each clock reading advances one second
    stats = matcher.MatchStats()
    found = list(
        matcher.candidates(
            vacancy=vacancy_for(world),
            policy=policy,
            provider=StoredDecisionProvider(),
            now=NOW,
            stats=stats,
            clock=lambda: next(ticks),
        )
    )
    assert stats.budget_hit == "TIME" and len(found) < 4


def test_the_simulators_stopped_clock_leaves_the_time_budget_unspent(world):
    """In a simulation run the budget's clock stands still, so a slow machine cuts no list short."""
    from sim.adapter import matcher_clock_stopped

    for _ in range(4):
        world.waiting()
    policy = services.policy_current(clinic=world.clinic)
    policy.page_size, policy.time_budget_ms = 1, 0
    stats = matcher.MatchStats()
    with matcher_clock_stopped():
        found = list(matcher.candidates(vacancy=vacancy_for(world), policy=policy, provider=StoredDecisionProvider(),
                                        now=NOW, stats=stats))
    assert len(found) == 4 and stats.budget_hit == "" and matcher.budget_clock is time.perf_counter


def test_time_the_caller_spends_between_candidates_is_not_the_matchers(world):
    """A dispatcher blocked on an entry lock must not make the matcher give up on the list."""
    for _ in range(4):
        world.waiting()
    policy = services.policy_current(clinic=world.clinic)
    policy.page_size = 1
    now = [0.0]
    stats = matcher.MatchStats()
    found = []
    for candidate in matcher.candidates(
        vacancy=vacancy_for(world), policy=policy, provider=StoredDecisionProvider(), now=NOW, stats=stats,
        clock=lambda: now[0],
    ):
        found.append(candidate)
        now[0] += 3600  # the caller waited an hour on a lock
    assert len(found) == 4 and stats.budget_hit == "" and stats.exhausted


def test_explain_uses_the_match_index_without_a_sort(world):
    """The page query seeks the partial index and reads it in order: O(log n + page)."""
    from tests.waitlist.factories import lift_entry_window_guard

    lift_entry_window_guard()  # 8,000 entries over 20 patients (rolled back with the test)
    clinic = world.clinic
    patients = [f.PatientFactory(clinic=clinic) for _ in range(20)]
    treatments = [world.treatment, world.other_treatment] + [
        f.TreatmentFactory(clinic=clinic) for _ in range(6)
    ]
    doctors = [world.doctor, world.other_doctor, None]
    rows = [
        WaitlistEntry(
            clinic=clinic,
            tenant_group=clinic.tenant_group,
            patient=patients[i % 20],
            treatment=treatments[i % len(treatments)],
            practitioner=doctors[i % 3],
            earliest=seoul(2, 0),
            latest=seoul(9, 0),
            priority_rank=i % 7,
            waiting_since=NOW - timedelta(minutes=i),
            status="WAITING" if i % 4 else "BOOKED",
        )
        for i in range(8_000)
    ]
    WaitlistEntry.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # every table: the plan rests on this test's rows alone (see below)
        vacancy = vacancy_for(world)
        policy = services.policy_current(clinic=clinic)
        params = matcher.page_params(vacancy=vacancy, policy=policy, now=NOW, after=(-3, NOW, 500))
        plans = {}
        for slot_fit in (1, 0):
            cursor.execute("EXPLAIN " + matcher.page_sql(slot_fit), params)
            plans[slot_fit] = "\n".join(row[0] for row in cursor.fetchall())
    for plan in plans.values():
        assert "wl_entry_match" in plan, plan
        assert "Sort" not in plan.split("SubPlan")[0], plan
        assert "Seq Scan on waitlist_waitlistentry" not in plan, plan
    assert AppointmentStatus  # keeps the import used when the plan is printed below
    print(plans[0])


BENCH_SHAPED_ENTRIES = """
INSERT INTO waitlist_waitlistentry
    (ref, clinic_id, tenant_group_id, patient_id, treatment_id, practitioner_id, resource_kind, earliest, latest,
     priority_rank, waiting_since, status, version, suppressed_until, withdraw_reason, created_at, updated_at)
SELECT 'wle_t' || %(c)s || 'x' || g, %(c)s, %(tg)s, %(first)s + (g %% %(np)s), %(tr)s,
       CASE WHEN random() < 0.3 THEN (%(docs)s::bigint[])[1 + (g %% %(ndocs)s)] END,
       '', r.earliest, r.earliest + interval '7 days', r.rank, r.since, 'WAITING', 1, NULL, '', r.since, %(base)s
FROM generate_series(1, %(n)s) g
CROSS JOIN LATERAL (
    SELECT %(base)s + interval '1 day' + random() * interval '53 days' AS earliest,
           CASE WHEN random() < 0.85 THEN 0 ELSE 1 + floor(random() * 3)::int END AS rank,
           %(base)s - random() * interval '180 days' AS since
    WHERE g > 0
) r
"""


def _bench_shaped_clinic(clinic, doctors, treatment, n):
    """``n`` WAITING entries shaped like bench/matcher.py's (bench/db.py ``bulk_entries``): 30 % name one of
    ``doctors``, 7-day windows placed uniformly over the next 60 days, rank 0 for 85 %, waiting up to 180 days;
    one INSERT … SELECT generate_series."""
    patients = [f.PatientFactory(clinic=clinic, consent=False) for _ in range(2)]
    with connection.cursor() as cursor:
        cursor.execute(BENCH_SHAPED_ENTRIES, {
            "c": clinic.pk, "tg": clinic.tenant_group_id, "first": patients[0].pk, "np": 2, "tr": treatment.pk,
            "docs": [d.pk for d in doctors], "ndocs": len(doctors), "base": NOW, "n": n,
        })


def _bench_shaped_world(world) -> list:
    """Five clinics of 8,000 bench-shaped entries, committed and VACUUM ANALYZEd as autovacuum leaves a production
    database (the plan must rest on these rows alone, not on dead rows and statistics that earlier tests'
    rolled-back transactions left in the tables the query joins); the first clinic's practitioners."""
    doctors = [world.doctor, world.other_doctor] + [f.PractitionerFactory(clinic=world.clinic) for _ in range(3)]
    _bench_shaped_clinic(world.clinic, doctors, world.treatment, 8_000)
    for _ in range(4):  # other clinics: a clinic's treatment determines the clinic (the scope statistics)
        other = waitlist_world()
        _bench_shaped_clinic(other.clinic, [other.doctor, other.other_doctor], other.treatment, 8_000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return doctors


def _plan_vacancy(world, doctors: list, day: int) -> Vacancy:
    starts_at = NOW + timedelta(days=day, hours=day % 9)
    vacancy = Vacancy.objects.create(
        vacancy_key=f"plan:{day}", clinic=world.clinic, tenant_group=world.clinic.tenant_group,
        practitioner=doctors[day % len(doctors)], treatment=world.treatment, starts_at=starts_at,
        ends_at=starts_at + timedelta(minutes=30),
    )
    return Vacancy.objects.select_related("clinic", "resource").get(pk=vacancy.pk)


@pytest.fixture
def bench_shaped_rows():
    """Bench-shaped entries reuse two patients per clinic, as bench/db.py reuses its patients: the one-live-entry
    guard is lifted for them and put back (on an emptied table) after the test."""
    from tests.waitlist.factories import lift_entry_window_guard, restore_entry_window_guard

    lift_entry_window_guard()
    yield
    restore_entry_window_guard()


def _plan_vacancies(world, every_days: int) -> tuple:
    """The bench-shaped world, the clinic's policy and a vacancy every ``every_days`` over the whole horizon (its
    sparse edges included)."""
    doctors = _bench_shaped_world(world)
    policy = services.policy_current(clinic=world.clinic)
    return policy, [_plan_vacancy(world, doctors, day) for day in range(2, 60, every_days)]


def _assert_ordered_index_scan(scan: str, plan: str) -> None:
    """One ordered scan of ``wl_entry_match`` with the window checked in the index: no Sort, no bitmap scan."""
    assert "Index Scan using wl_entry_match on waitlist_waitlistentry" in scan, plan
    assert "Sort" not in scan and "Bitmap Heap Scan on waitlist_waitlistentry" not in scan, plan
    assert "(earliest <=" in scan.split("Index Cond:")[1].split("\n")[0], plan


@pytest.mark.fastpaths
@pytest.mark.django_db(transaction=True)
def test_pages_with_their_decisions_read_the_index_in_order_and_each_decision_by_its_index(world, bench_shaped_rows):
    """A gated dispatch's pages read each row's newest stored decision in the same statement (a lateral read per
    row): the page itself is still one ordered scan of ``wl_entry_match``, no Sort over it, in the plan for its
    values and in the generic plan PostgreSQL keeps for the prepared statement."""
    from tests.plans import prepared_plans
    from waitlist import queries

    policy, vacancies = _plan_vacancies(world, 2)
    for vacancy in vacancies:
        first = matcher.page_params(vacancy=vacancy, policy=policy, now=NOW)
        later = matcher.page_params(vacancy=vacancy, policy=policy, now=NOW, after=(0, NOW - timedelta(days=90), 0))
        for sql, params, tiers in ((queries.first_pages_sql(decisions=True), first, 2),
                                   (queries.page_sql(1, decisions=True), later, 1),
                                   (queries.page_sql(0, decisions=True), later, 1)):
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN " + sql, params)
                plan = "\n".join(row[0] for row in cursor.fetchall())
            _assert_page_with_decisions(plan, tiers)
            generic = prepared_plans(sql, params, runs=6)
            assert generic["generic_plans"] >= 1, generic
            _assert_page_with_decisions(generic["generic"], tiers)


def _assert_page_with_decisions(plan: str, tiers: int) -> None:
    """The page, then one lateral read of the decisions per row (the last Limit): each tier one ordered scan of
    ``wl_entry_match`` with the window in the index, and nothing sorts the page."""
    page, lateral = plan.rsplit("->  Limit", 1)
    assert plan.startswith("Nested Loop Left Join") and "waitlist_bookingreliabilitydecision" in lateral, plan
    scans = page.split("Index Scan using wl_entry_match on waitlist_waitlistentry")[1:]
    assert len(scans) == tiers, plan
    for scan in scans:
        assert "(earliest <=" in scan.split("Index Cond:")[1].split("\n")[0], plan
    assert "Sort" not in page.split("SubPlan")[0] and "Bitmap Heap Scan on waitlist_waitlistentry" not in page, plan


@pytest.mark.django_db(transaction=True)
def test_explain_reads_the_index_in_order_on_bench_shaped_data(world, bench_shaped_rows):
    """Issue 15: on data shaped like the benchmark's (five clinics of 8,000 entries, 7-day windows over 60
    days, ANALYZEd), every vacancy's page, both tiers, from the first page on, is one ordered scan of
    ``wl_entry_match`` with the window as an index condition: no Sort, no Bitmap Heap Scan of the tier."""
    policy, vacancies = _plan_vacancies(world, 2)
    plans = []
    for vacancy in vacancies:
        params = matcher.page_params(vacancy=vacancy, policy=policy, now=NOW)
        with connection.cursor() as cursor:
            for slot_fit in (1, 0):
                cursor.execute("EXPLAIN " + matcher.page_sql(slot_fit), params)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
    for plan in plans:
        _assert_ordered_index_scan(plan.split("SubPlan")[0], plan)


@pytest.mark.fastpaths
@pytest.mark.django_db(transaction=True)
def test_prepared_page_plans_read_the_index_in_order_on_bench_shaped_data(world, bench_shaped_rows):
    """Issue 15: the matcher's statements run as server-side prepared statements (``prepared_cursor``), and
    PostgreSQL may then plan them once without values (a generic plan, after five executions). On the bench-shaped
    data the generic plan of the first pages (both tiers) and of each tier's next page is the same ordered scan of
    ``wl_entry_match`` with the window in the index condition, and it is the plan PostgreSQL chooses."""
    from tests.plans import prepared_plans

    policy, vacancies = _plan_vacancies(world, 8)
    plans = []
    for vacancy in vacancies:
        first = matcher.page_params(vacancy=vacancy, policy=policy, now=NOW)
        later = matcher.page_params(vacancy=vacancy, policy=policy, now=NOW, after=(0, NOW - timedelta(days=90), 0))
        for sql, params in ((matcher._FIRST_PAGES, first), (matcher.page_sql(1), later), (matcher.page_sql(0), later)):
            out = prepared_plans(sql, params, runs=6)
            assert out["generic_plans"] >= 1, out  # PostgreSQL chose the generic plan (``auto`` is it)
            plans.append(out["generic"])
    for plan in plans:
        for branch in plan.split("Subquery Scan on p")[1:] or [plan]:
            _assert_ordered_index_scan(branch.split("SubPlan")[0], plan)


def _pages(world, provider, policy=None, vacancy=None):
    policy = policy or services.policy_current(clinic=world.clinic)
    return [c for page in matcher.candidate_pages(vacancy=vacancy or vacancy_for(world), policy=policy,
                                                  provider=provider, now=NOW) for c in page]


def test_the_decisions_read_with_the_page_are_the_stored_providers(world):
    """Issue 42: with the stored provider installed, a gated page reads each candidate's newest decision in its own
    statement; the decisions and their status now are those the provider's batch read gives (the newest received,
    a FRESH one past its expiry STALE, none UNAVAILABLE), over pages of one row and the kept second tier."""
    later = NOW + timedelta(minutes=5)
    superseded = world.waiting()
    decide(superseded.patient, ref="rel-old", rank=9)
    newest = decide(superseded.patient, DecisionStatus.STALE, ref="rel-new")
    newest.received_at = later
    newest.save(update_fields=["received_at"])
    expired = world.waiting()
    decide(expired.patient, expires_at=NOW - timedelta(minutes=1), ref="rel-expired")
    world.waiting(fresh=False)
    world.waiting(practitioner=world.doctor)
    policy = services.policy_current(clinic=world.clinic)
    for page_size in (policy.page_size, 1):
        policy.page_size = page_size
        in_page = _pages(world, None, policy)
        by_batch = _pages(world, StoredDecisionProvider(), policy)
        assert [(c.entry_id, c.decision, c.decision_status) for c in in_page] == [
            (c.entry_id, c.decision, c.decision_status) for c in by_batch]
    statuses = {c.entry_id: (c.decision and c.decision.decision_ref, c.decision_status) for c in in_page}
    assert statuses[superseded.pk] == ("rel-new", DecisionStatus.STALE)
    assert statuses[expired.pk] == ("rel-expired", DecisionStatus.STALE)
    assert {status for _ref, status in statuses.values()} == {
        DecisionStatus.FRESH, DecisionStatus.STALE, DecisionStatus.UNAVAILABLE}


def test_a_gated_page_runs_no_statement_of_its_own_for_the_stored_decisions(world):
    from django.test.utils import CaptureQueriesContext

    world.waiting()
    world.waiting(practitioner=world.doctor)
    policy, vacancy = services.policy_current(clinic=world.clinic), vacancy_for(world)
    with CaptureQueriesContext(connection) as captured:
        found = _pages(world, None, policy, vacancy)
    assert len(found) == 2 and all(c.decision_status == DecisionStatus.FRESH for c in found)
    statements = [q["sql"] for q in captured.captured_queries]
    assert len(statements) == 1 and "waitlist_bookingreliabilitydecision" in statements[0], statements


def test_another_installed_provider_is_asked_though_the_page_read_the_stored_decisions(world):
    """A provider installed in place of the stored one (a CRM client, say) answers for the page."""
    from waitlist.reliability.feed import Decision, set_decision_provider

    entry = world.waiting()

    class Elsewhere(StoredDecisionProvider):
        def decisions_for(self, *, clinic, patient_ids):
            return {pid: Decision("crm-1", DecisionStatus.STALE, 0, None) for pid in patient_ids}

    previous = set_decision_provider(Elsewhere())
    try:
        [candidate] = _pages(world, None)
    finally:
        set_decision_provider(previous)
    assert candidate.entry_id == entry.pk
    assert (candidate.decision.decision_ref, candidate.decision_status) == ("crm-1", DecisionStatus.STALE)
