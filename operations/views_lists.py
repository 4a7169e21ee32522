"""Console lists of everything, not only exceptions: vacancies, offers, the waiting list and finished
reevaluation jobs. Keyset-paged, filterable, polled cheaply (a version ETag: a poll that finds nothing
new answers 304 without reading the list). Thin: selectors do the reading."""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.utils.http import urlencode

from common.timefmt import iso_in_zone
from reevaluation import selectors as reevaluation_selectors
from reevaluation.models import JobState, Outcome
from scheduling.models import Clinic, Practitioner, Treatment
from waitlist.models import EntryStatus, OfferStatus, VacancyStatus
from waitlist.selectors import ACTIVE_OFFERS, entry_page, offer_page, vacancy_page

from .decorators import clinic_view
from .forms import ListFilterForm, new_idempotency_key
from .overview import clinic_counters, console_version
from .responses import HtmxHttpRequest, console_error, render_clinic_page, with_toast

POLL_HEADER = "HTTP_X_CONSOLE_POLL"


@dataclass(frozen=True)
class ConsoleList:
    key: str
    title: str
    section: str
    hint: str
    statuses: tuple[str, ...]
    fields: tuple[str, ...]
    fetch: Callable
    outcomes: tuple[str, ...] = ()
    #: Quick filters shown as links above the table: (label, query dict).
    presets: tuple[tuple[str, dict], ...] = field(default_factory=tuple)


def _waitlist_fetch(selector):
    def fetch(clinic, *, limit, after, filters):
        return selector(
            clinic=clinic, limit=limit, after=after, status=filters.get("status"), day=filters.get("date"),
            practitioner=filters.get("practitioner"), treatment=filters.get("treatment"),
        )

    return fetch


def _jobs_fetch(clinic, *, limit, after, filters):
    return reevaluation_selectors.finished_jobs_page(
        clinic=clinic, limit=limit, after=after, state=filters.get("status"), outcome=filters.get("outcome"),
        failure_code=filters.get("failure_code"), day=filters.get("date"),
    )


WAITLIST_FIELDS = ("status", "practitioner", "treatment", "date")

LISTS: dict[str, ConsoleList] = {
    "vacancies": ConsoleList(
        "vacancies", "Vacancies", "waitlist", "Newest first. Date = the slot's day.", tuple(VacancyStatus.values),
        WAITLIST_FIELDS, _waitlist_fetch(vacancy_page),
        presets=(("Open", {"status": "OPEN"}), ("In review", {"status": "REVIEW"}),
                 ("Recent fills", {"status": "FILLED"})),
    ),
    "offers": ConsoleList(
        "offers", "Offers", "waitlist", "Newest first. Date = the slot's day. Active offers count down to expiry.",
        (ACTIVE_OFFERS, *OfferStatus.values), WAITLIST_FIELDS,
        _waitlist_fetch(offer_page),
        presets=(("Active", {"status": "ACTIVE"}), ("Recent expiries", {"status": "EXPIRED"}),
                 ("Declined", {"status": "DECLINED"})),
    ),
    "entries": ConsoleList(
        "entries", "Waiting list", "waitlist",
        "Longest waiting first. Date = a day the entry's window covers. Refs only: no patient data.",
        tuple(EntryStatus.values), WAITLIST_FIELDS, _waitlist_fetch(entry_page),
        presets=(("Waiting", {"status": "WAITING"}), ("Offered", {"status": "OFFERED"})),
    ),
    "jobs": ConsoleList(
        "jobs", "Finished jobs", "reevaluation", "Newest first. Date = the day the job finished.",
        reevaluation_selectors.FINISHED_STATES, ("status", "outcome", "failure_code", "date"), _jobs_fetch,
        outcomes=tuple(Outcome.values),
        presets=(("Failed", {"status": JobState.FAILED}), ("Completed", {"status": JobState.COMPLETED})),
    ),
}
WAITLIST_TABS = ("vacancies", "offers", "entries")


def _reference_choices(clinic: Clinic, spec: ConsoleList) -> dict:
    if "practitioner" not in spec.fields:
        return {}
    return {
        "practitioners": Practitioner.objects.filter(clinic=clinic).order_by("name", "id").values_list("ref", "name"),
        "treatments": Treatment.objects.filter(clinic=clinic).order_by("name", "id").values_list("ref", "name"),
    }


def _etag(clinic: Clinic, spec: ConsoleList, request: HttpRequest) -> str:
    raw = f"{clinic.ref}|{spec.key}|{request.GET.urlencode()}|{console_version(clinic=clinic)}"
    return '"' + hashlib.sha256(raw.encode()).hexdigest()[:32] + '"'


#: The CSV export's columns per list: refs, short codes, states, times and the practitioner's and treatment's
#: names (attribute paths on a row); never a patient's.
CSV_COLUMNS: dict[str, tuple[str, ...]] = {
    "vacancies": ("ref", "status", "starts_at", "ends_at", "practitioner.name", "treatment.name", "active_offer_ref",
                  "active_offer_status", "offer_count", "created_at"),
    "offers": ("ref", "status", "reason_code", "standing", "expires_at", "vacancy.ref", "entry.ref", "created_at",
               "code", "vacancy.practitioner.name", "vacancy.treatment.name"),
    "entries": ("ref", "status", "opted_out", "earliest", "latest", "priority_rank", "waiting_since", "treatment.name",
                "practitioner.name"),
    "jobs": ("ref", "state", "revision", "last_failure_code", "attempts", "finished_at"),
}

CSV_MAX_ROWS = 5000


def _csv_value(row, path: str, tz: str):
    value = row
    for part in path.split("."):
        value = getattr(value, part, None)
        if value is None:
            return ""
    return iso_in_zone(value, tz) if isinstance(value, datetime) else value


def _csv(clinic: Clinic, spec: ConsoleList, filters: dict) -> HttpResponse:
    """The filtered list as CSV (keyset pages up to ``CSV_MAX_ROWS``), times in the clinic's zone."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{clinic.ref}-{spec.key}.csv"'
    writer = csv.writer(response)
    columns = CSV_COLUMNS[spec.key]
    writer.writerow([c.replace(".", "_") for c in columns])
    after, written = "", 0
    while written < CSV_MAX_ROWS:
        page = spec.fetch(clinic, limit=500, after=after, filters=filters)
        for row in page.items[: CSV_MAX_ROWS - written]:
            writer.writerow([_csv_value(row, c, clinic.timezone) for c in columns])
            written += 1
        if not page.next:
            break
        after = page.next
    return response


def _render_list(request: HtmxHttpRequest, clinic: Clinic, spec: ConsoleList) -> HttpResponse:
    etag = None
    if request.META.get(POLL_HEADER):
        etag = _etag(clinic, spec, request)
        if request.headers.get("If-None-Match") == etag:
            return HttpResponseNotModified(headers={"ETag": etag})
    form = ListFilterForm(
        request.GET, statuses=spec.statuses, outcomes=spec.outcomes, fields=spec.fields,
        **_reference_choices(clinic, spec),
    )
    if not form.is_valid():
        return console_error(request, 400, "The filter is not valid.")
    filters, after = form.filters(), form.cleaned_data["after"]
    if request.GET.get("format") == "csv":
        return _csv(clinic, spec, filters)
    page = spec.fetch(clinic, limit=settings.CONSOLE_LIST_PAGE_SIZE, after=after, filters=filters)
    context = {
        "bulk_key": new_idempotency_key(),
        "list": spec, "form": form, "page": page, "filters": filters,
        "filter_query": urlencode({k: str(v) for k, v in filters.items()}),
        "tabs": [LISTS[k] for k in WAITLIST_TABS] if spec.section == "waitlist" else [],
    }
    if request.htmx and after:
        response = render(request, "operations/lists.html#rows", {"clinic": clinic, **context})
        if page.next is None:
            with_toast(response, "That is the last page.")
        return response
    context["counters"] = clinic_counters(clinic=clinic)
    if request.htmx and request.htmx.target == "list-results":
        response = render(request, "operations/lists.html#results", {"clinic": clinic, **context})
    else:
        response = render_clinic_page(request, "operations/lists.html", clinic, spec.section, context)
    if etag:
        response["ETag"] = etag
    # The browser revalidates polls with If-None-Match and hands htmx the cached body on a 304.
    response["Cache-Control"] = "private, no-cache"
    patch_vary_headers(response, ("HX-Request", "X-Console-Poll"))
    return response


@clinic_view()
def waitlist_list(request: HtmxHttpRequest, clinic: Clinic, kind: str) -> HttpResponse:
    spec = LISTS.get(kind)
    if spec is None or spec.section != "waitlist":
        return console_error(request, 404)
    return _render_list(request, clinic, spec)


@clinic_view()
def reevaluation_finished(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    return _render_list(request, clinic, LISTS["jobs"])
