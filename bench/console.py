"""5. Console: server time of the reevaluation page and the waitlist page of a clinic with 10k jobs and
10k waitlist entries, through Django's test client signed in as an ADMIN (no network in the timing).

The pages are built by other issues; a page whose URL name does not resolve in this build is reported
as not available, not as a failure."""

from __future__ import annotations

import time

from django.urls import NoReverseMatch

from . import db, reevaluation
from .harness import Result, fmt_stat, log, percentile, scale, stat

PAGES = (("console:reevaluation", "reevaluation page"), ("console:waitlist", "waitlist page"))


def _url(name: str, clinic) -> str | None:
    from django.urls import reverse

    for kwargs in ({"clinic_ref": clinic.ref}, {}):
        try:
            return reverse(name, kwargs=kwargs)
        except NoReverseMatch:
            continue
    return None


def run() -> Result:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    cfg = scale()
    rows_n, requests = cfg["console_rows"], cfg["console_requests"]
    result = Result("console", "5. Console: server time of the reevaluation and waitlist pages")
    clinic = db.make_clinic("console", practitioners=10)
    urls = {name: _url(name, clinic) for name, _ in PAGES}
    available = {k: v for k, v in urls.items() if v}
    table = []
    data = {}
    if available:
        log(f"console: building {rows_n:,} jobs and {rows_n:,} entries")
        reevaluation.enable(clinic)
        reevaluation.bulk_jobs(clinic, rows_n)
        patients = db.bulk_patients(clinic, min(rows_n, 5_000))
        db.bulk_entries(
            clinic,
            rows_n,
            patients=patients,
            treatment_id=clinic.bench_treatments[0].pk,
            practitioner_ids=[p.pk for p in clinic.bench_practitioners],
        )
        db.analyze("reevaluation_reevaluationjob", "waitlist_waitlistentry")
        user, _token = db.staff_user(clinic, "bench-console-admin", role="ADMIN")
    for name, label in PAGES:
        url = urls[name]
        if url is None:
            table.append([label, f"`{name}`", "page not available in this build", "–", "–", "–"])
            data[name] = {"available": False}
            continue
        client = Client()
        client.force_login(user)
        client.get(url)  # warm: templates compiled, caches filled
        p50, p95, queries, statuses = [], [], [], set()
        for _ in range(cfg["runs"]):
            times = []
            for _ in range(requests):
                with CaptureQueriesContext(connection) as q:
                    t = time.perf_counter()
                    response = client.get(url)
                    times.append((time.perf_counter() - t) * 1000)
                statuses.add(response.status_code)
                queries.append(len(q.captured_queries))
            p50.append(percentile(times, 50))
            p95.append(percentile(times, 95))
        data[name] = {
            "available": True,
            "url": url,
            "p50_ms": stat(p50),
            "p95_ms": stat(p95),
            "queries": max(queries),
            "statuses": sorted(statuses),
        }
        table.append(
            [
                label,
                f"`{name}`",
                ", ".join(map(str, sorted(statuses))),
                fmt_stat(data[name]["p50_ms"]),
                fmt_stat(data[name]["p95_ms"]),
                str(max(queries)),
            ]
        )
    result.data = data
    result.table(
        f"Server time per page (ms), {requests} requests per run, clinic with {rows_n:,} jobs and {rows_n:,} entries",
        ["page", "URL name", "HTTP status", "p50", "p95", "queries"],
        table,
    )
    if len(available) < len(PAGES):
        result.status = "partial: " + ", ".join(f"{n} not available in this build" for n in urls if not urls[n])
        result.note(
            "**Not available in this build.** The console pages are built by other issues; when a page's URL name "
            "(`console:reevaluation`, `console:waitlist`, taking `clinic_ref`) resolves, this benchmark times it "
            "with no change: build the clinic's 10k jobs and 10k entries, sign in an ADMIN, GET the page."
        )
    result.note(
        "**What is timed.** Django's test client, signed in as an ADMIN of the clinic, GETs the page: the time is "
        "the server's (middleware, view, queries, template), with no network and no browser. The query count "
        "is the most per request; a page that lists a bounded action queue should keep it constant as the "
        "clinic grows."
    )
    return result
