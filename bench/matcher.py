"""1. Matcher: time to choose the next candidate for a vacancy, at growing waitlist sizes, against the
peer's approach (load every candidate of the clinic and service ordered by creation, then filter the
window in memory) implemented here on the same tables and measured on the same data."""

from __future__ import annotations

import json
import random
import time
from datetime import timedelta

from . import db
from .harness import Result, fmt, fmt_stat, log, percentile, plot, scale, stat

PRACTITIONERS = 10


def _vacancies(clinic, n: int, rng: random.Random):
    """Vacancies (rows as the cancel service makes them) at random 30-minute slots in the next 60 days."""
    from django.utils import timezone

    from common.refs import new_ref
    from waitlist.models import Vacancy

    base = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(days=2)
    rows = []
    for i in range(n):
        starts = base + timedelta(minutes=30 * rng.randrange(0, 56 * 24 * 2))
        rows.append(
            Vacancy(
                ref=new_ref("vac"),
                vacancy_key=f"bench:{clinic.pk}:{i}",
                clinic=clinic,
                tenant_group_id=clinic.tenant_group_id,
                practitioner=rng.choice(clinic.bench_practitioners),
                treatment=clinic.bench_treatments[0],
                starts_at=starts,
                ends_at=starts + timedelta(minutes=30),
            )
        )
    Vacancy.objects.bulk_create(rows)
    return list(Vacancy.objects.select_related("clinic", "resource").filter(clinic=clinic).order_by("pk"))


def build(label: str, entries: int):
    clinic = db.make_clinic(label, practitioners=PRACTITIONERS)
    patients = db.bulk_patients(clinic, min(entries, 20_000))
    db.bulk_fresh_decisions(clinic, *patients)
    db.bulk_entries(
        clinic,
        entries,
        patients=patients,
        treatment_id=clinic.bench_treatments[0].pk,
        practitioner_ids=[p.pk for p in clinic.bench_practitioners],
    )
    return clinic


def choose_ours(vacancy, policy, provider, now):
    """What dispatch does before it takes a lock: walk the matcher to the first FRESH candidate."""
    from waitlist.dispatch import matcher
    from waitlist.models import DecisionStatus

    for candidate in matcher.candidates(vacancy=vacancy, policy=policy, provider=provider, now=now):
        decision = candidate.decision
        if decision is not None and decision.effective_status(now) == DecisionStatus.FRESH:
            return candidate.entry_id
    return None


def choose_peer(vacancy, now):
    """The peer's ``offerSlot``: every WAITING candidate of the clinic and service (with its patient),
    oldest first, minus those already offered this slot and the cancelling patient; then the first
    whose window fits, found in memory."""
    from waitlist.models import Offer, WaitlistEntry

    prior = list(Offer.objects.filter(vacancy_id=vacancy.pk).values_list("entry_id", flat=True))
    qs = WaitlistEntry.objects.filter(
        clinic_id=vacancy.clinic_id, treatment_id=vacancy.treatment_id, status="WAITING"
    ).exclude(id__in=prior)
    if vacancy.excluded_patient_id:
        qs = qs.exclude(patient_id=vacancy.excluded_patient_id)
    candidates = list(qs.select_related("patient").order_by("created_at"))
    for entry in candidates:
        if entry.earliest <= vacancy.starts_at and vacancy.ends_at <= entry.latest:
            return entry.pk
    return None


def plan_shapes(vacancies, policies, now, count: int = 10) -> dict:
    """EXPLAIN both tiers' page query for ``count`` vacancies: does the plan read the index in order
    (Index Scan, no Sort) or scan the whole tier and sort it (Bitmap Heap Scan + Sort)?"""
    from django.db import connection

    from waitlist.dispatch import matcher

    shapes = {"index_order": 0, "sorted": 0}
    for vacancy in vacancies[:count]:
        for tier in (1, 0):
            params = matcher.page_params(vacancy=vacancy, policy=policies[vacancy.clinic_id], now=now)
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (FORMAT JSON) " + matcher.page_sql(tier), params)
                plan = cursor.fetchone()[0]
            text = json.dumps(plan)
            shapes["sorted" if '"Node Type": "Sort"' in text else "index_order"] += 1
    return shapes


def _sample(fn, vacancies, count: int, rng: random.Random) -> list[float]:
    times = []
    for vacancy in rng.sample(vacancies, min(count, len(vacancies))) if count <= len(vacancies) else vacancies:
        start = time.perf_counter()
        fn(vacancy)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _peer_samples(entries_in_clinic: int) -> int:
    if entries_in_clinic <= 20_000:
        return 10
    if entries_in_clinic <= 200_000:
        return 3
    return 1


def run() -> Result:
    from django.utils import timezone

    from waitlist.reliability.feed import get_decision_provider
    from waitlist.services import policy_current

    cfg = scale()
    rng = random.Random(7)
    result = Result("matcher", "1. Matcher: choosing the next candidate")
    datasets = []  # (label, total entries, clinics, per-clinic entries)
    for n in cfg["matcher_sizes"]:
        log(f"matcher: building {n:,} entries in one clinic")
        clinic = build(f"m{n}", n)
        datasets.append({"label": f"{n:,} in 1 clinic", "entries": n, "clinics": [clinic], "per_clinic": n})
    spread_total, spread_clinics = cfg["matcher_spread"]
    log(f"matcher: building {spread_total:,} entries over {spread_clinics} clinics")
    clinics = [build(f"s{i}", spread_total // spread_clinics) for i in range(spread_clinics)]
    datasets.append(
        {
            "label": f"{spread_total:,} over {spread_clinics} clinics",
            "entries": spread_total,
            "clinics": clinics,
            "per_clinic": spread_total // spread_clinics,
        }
    )
    log("matcher: VACUUM ANALYZE")
    # Every table the page query reads: a table never analyzed (the consents, until autovacuum gets to it)
    # is estimated at a few rows, and the planner then hashes all of it for the page's consent check.
    db.analyze("waitlist_waitlistentry", "scheduling_patient", "waitlist_bookingreliabilitydecision",
               "scheduling_contactconsent")

    provider = get_decision_provider()
    rows, ratio_rows, data = [], [], {}
    for ds in datasets:
        vacs = []
        for clinic in ds["clinics"]:
            vacs += _vacancies(clinic, max(3, cfg["matcher_samples"] // len(ds["clinics"])) + 5, rng)
        policies = {c.pk: policy_current(clinic=c) for c in ds["clinics"]}
        now = timezone.now()
        ours_p50, ours_p99, peer_p50, peer_p99, ratio = [], [], [], [], []
        found = 0
        for run_no in range(cfg["runs"]):
            log(f"matcher: {ds['label']} run {run_no + 1}")
            ours = _sample(
                lambda v, policies=policies, now=now: choose_ours(v, policies[v.clinic_id], provider, now),
                vacs,
                cfg["matcher_samples"],
                rng,
            )
            peer = _sample(lambda v, now=now: choose_peer(v, now), vacs, _peer_samples(ds["per_clinic"]), rng)
            ours_p50.append(percentile(ours, 50))
            ours_p99.append(percentile(ours, 99))
            peer_p50.append(percentile(peer, 50))
            peer_p99.append(percentile(peer, 99))
            ratio.append(percentile(peer, 50) / percentile(ours, 50))
        shapes = plan_shapes(vacs, policies, now)
        found = sum(choose_ours(v, policies[v.clinic_id], provider, now) is not None for v in vacs[:20])
        data[ds["label"]] = {
            "entries": ds["entries"],
            "clinics": len(ds["clinics"]),
            "ours_p50_ms": stat(ours_p50),
            "ours_p99_ms": stat(ours_p99),
            "peer_p50_ms": stat(peer_p50),
            "peer_p99_ms": stat(peer_p99),
            "peer_over_ours_p50": stat(ratio),
            "ours_samples_per_run": min(cfg["matcher_samples"], len(vacs)),
            "peer_samples_per_run": _peer_samples(ds["per_clinic"]),
            "vacancies_with_a_candidate_of_20": found,
            "page_plans": shapes,
        }
        d = data[ds["label"]]
        rows.append(
            [
                ds["label"],
                fmt_stat(d["ours_p50_ms"]),
                fmt_stat(d["ours_p99_ms"]),
                fmt_stat(d["peer_p50_ms"]),
                fmt_stat(d["peer_p99_ms"]),
                fmt_stat(d["peer_over_ours_p50"]),
                f"{shapes['sorted']} of {shapes['sorted'] + shapes['index_order']}",
            ]
        )
    result.table(
        "Time to choose the next candidate (ms): ours (keyset matcher) vs the peer (load all, filter in memory)",
        [
            "WAITING entries",
            "ours p50",
            "ours p99",
            "peer p50",
            "peer p99",
            "peer ÷ ours (p50)",
            "our page plans with a Sort",
        ],
        rows,
    )
    sizes = cfg["matcher_sizes"]
    small, large = f"{sizes[0]:,} in 1 clinic", f"{sizes[-1]:,} in 1 clinic"
    growth_ours = [
        a / b for a, b in zip(data[large]["ours_p50_ms"]["runs"], data[small]["ours_p50_ms"]["runs"], strict=True)
    ]
    growth_peer = [
        a / b for a, b in zip(data[large]["peer_p50_ms"]["runs"], data[small]["peer_p50_ms"]["runs"], strict=True)
    ]
    data["growth_ours"] = stat(growth_ours)
    data["growth_peer"] = stat(growth_peer)
    ratio_rows.append(
        [
            f"p50 at {sizes[-1]:,} ÷ p50 at {sizes[0]:,}",
            fmt_stat(stat(growth_ours)),
            fmt_stat(stat(growth_peer)),
            f"{sizes[-1] / sizes[0]:,.0f}",
        ]
    )
    result.table(
        "Growth (same run): logarithmic growth means close to 1; linear growth means the size ratio",
        ["ratio", "ours", "peer", "size ratio"],
        ratio_rows,
    )
    result.data = data
    result.plots.append(_plot(data, sizes))
    add_notes(result, data, sizes)
    return result


def add_notes(result: Result, data: dict, sizes: list[int]) -> None:
    small, large = f"{sizes[0]:,} in 1 clinic", f"{sizes[-1]:,} in 1 clinic"
    samples = data[small]["ours_samples_per_run"]
    result.note(
        f"**What is timed.** *Ours*: `waitlist.dispatch.matcher.candidates()` walked to the first candidate with a "
        "FRESH "
        f"booking-reliability decision, exactly what `vacancy_dispatch` does before it takes any lock "
        f"(keyset pages over the partial index `wl_entry_match`, hard eligibility in SQL, one decision batch "
        f"per page). *Peer*: the seed's `offerSlot` on our tables through the ORM: every WAITING entry of the "
        f"clinic and treatment with its patient, ordered by creation, minus the entries already offered this "
        f"slot and the cancelling patient, then the first whose window fits, found in Python. Both run on "
        f"the same data in the same run; p50/p99 are over {samples} random vacancies per run for ours and over "
        f"fewer for the peer (10 per run up to 20k entries per clinic, 3 up to 200k, 1 above; with so few "
        f"samples its p99 is its maximum)."
    )
    result.note(
        "**Data.** Each clinic has 10 practitioners and one treatment; 30 % of entries name a practitioner, "
        "70 % accept any; each window is 7 days placed uniformly over the next 60 days (so about one entry in "
        "eight fits a given slot: the matcher skips non-fitting rows inside the index scan); priority rank 0 "
        "for 85 %, 1–3 otherwise; waiting since up to 180 days; availability (issue 40) any time for 60 %, any "
        "part of a weekday for 20 %, mornings of any day for 20 % (`bench.db.AVAILABILITY_MIX`: the matcher's "
        "UNAVAILABLE rule filters the rows the window index condition let through); every patient has a FRESH "
        "decision. "
        "Built with one `INSERT … SELECT generate_series` per table, then `VACUUM ANALYZE`."
    )
    g = data["growth_ours"]["median"]
    sorted_plans = {
        label: v["page_plans"]["sorted"] for label, v in data.items() if isinstance(v, dict) and "page_plans" in v
    }
    any_sorted = any(sorted_plans.values())
    if g <= 2 and not any_sorted:
        verdict = (
            f"Ours grows by ×{g:.2f} for ×{sizes[-1] // sizes[0]} more entries and every page plan reads "
            "`wl_entry_match` in order: the index seek is O(log n) and the page is bounded, as `docs/waitlist.md` says."
        )
    else:
        verdict = (
            f"Ours grows by ×{g:.2f} at p50 for ×{sizes[-1] // sizes[0]} more entries; its p99 at {large} is "
            f"{data[large]['ours_p99_ms']['median']:.0f} ms. "
        ) + (
            "Where it grows (above all at p99), the cause is the plan, not the index: for some vacancies "
            "PostgreSQL does not read `wl_entry_match` in order but takes a Bitmap Heap Scan of the whole tier "
            "and a top-N Sort (column *our page plans with a Sort*, from `EXPLAIN` of both tiers for 10 "
            "vacancies). The planner "
            "multiplies the selectivities of the residual filters as if independent (`earliest <= start`, "
            "`latest >= end`, the weekly-cap subquery's default 1/3, suppression, resource kind), estimates a "
            "handful of rows where hundreds match, decides the `LIMIT` will not stop an ordered scan early, "
            "and reads every row of the tier instead: that is linear in the tier's size, and at 1M "
            "entries a tier holds tens of thousands of rows. The plan test in `tests/waitlist/test_matcher.py` "
            "asserts the index plan on its own 8,000-entry data set; on this data, with 7-day windows spread "
            "over 60 days, the planner chooses otherwise. Fixes, cheapest first: run the page query with "
            "`SET LOCAL enable_bitmapscan = off` and `enable_sort = off` (the index order is then the only "
            "plan); or make the ordered index scan explicit (an inner `ORDER BY … LIMIT` over the index "
            "columns only, residual filters outside, looping while the page is short); or put the window in "
            "the index (a `tstzrange(earliest, latest)` column with a GiST index, or a window-week bucket in "
            "the btree key) so fewer rows need filtering at all."
            if any_sorted
            else "The plans read the index in order; the growth comes from residual filters rejecting more "
            "rows at the head of the order and from the machine's load (see the min–max spread)."
        )
    result.note(
        f"**Reading it.** {verdict} The peer reads and materialises every candidate of the clinic on every "
        f"vacancy, so its time grows linearly with the waitlist (×{data['growth_peer']['median']:.0f} here), and "
        "spreading the same total over 100 clinics helps it only because each clinic is smaller. The peer also "
        "ignores priority and the named practitioner, so even where it is fast enough it chooses a different "
        "(worse) candidate."
    )


def _plot(data: dict, sizes: list[int]) -> str:
    def draw(fig, ax):
        xs = sizes
        for key, label, style in (
            ("ours_p50_ms", "ours p50", "o-"),
            ("ours_p99_ms", "ours p99", "o--"),
            ("peer_p50_ms", "peer p50", "s-"),
        ):
            med = [data[f"{n:,} in 1 clinic"][key]["median"] for n in xs]
            lo = [data[f"{n:,} in 1 clinic"][key]["min"] for n in xs]
            hi = [data[f"{n:,} in 1 clinic"][key]["max"] for n in xs]
            ax.errorbar(
                xs,
                med,
                yerr=[[m - a for m, a in zip(med, lo, strict=True)], [b - m for m, b in zip(med, hi, strict=True)]],
                fmt=style,
                capsize=3,
                label=label,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("WAITING entries in the clinic")
        ax.set_ylabel("time to choose the next candidate (ms)")
        ax.set_title("Matcher scaling (median of runs, bars: min–max)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()

    return plot("matcher.png", draw)


__all__ = ["run", "fmt"]
