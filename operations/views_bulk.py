"""Bulk staff review: resolve several vacancies in review at once (PROMOTE or SKIP, one reason).

Two steps: the first POST shows a summary of what would happen (nothing changes); the confirm POST
runs the single review command for each vacancy, one by one: the same service
(``vacancy_review_resolve``), each in its own transaction with its own audit row, each under its own
idempotency key (``<form key>:<vacancy ref>``), so a double submit replays every row's answer and a
refusal of one row (``VACANCY_NOT_IN_REVIEW``, ``CANDIDATE_INELIGIBLE``, …) leaves the others done.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from scheduling.models import Clinic
from waitlist.selectors import vacancies_by_ref

from .decorators import clinic_view
from .forms import BulkReviewForm
from .responses import console_error, with_toast
from .views_waitlist import CHANGED_EVENT, review_execute, run_once

TEMPLATE = "operations/partials/bulk_review.html"


def _row(clinic: Clinic, request: HttpRequest, ref: str, data: dict) -> dict:
    row_data = {**data, "idempotency_key": f"{data['idempotency_key']}:{ref}"}
    outcome = run_once(request, clinic, command="review", data=row_data, target=ref,
                       execute=lambda d, correlation_id: review_execute(clinic, ref, request.user, d, correlation_id))
    body = outcome.body
    if not outcome.ok:
        return {"ref": ref, "ok": False, "code": body.get("code"), "detail": body.get("detail", "")}
    return {"ref": ref, "ok": True, "outcome": body["status"], "offer": body.get("offer"),
            "correlation_id": body.get("correlation_id"), "replayed": outcome.replayed}


@clinic_view(command="vacancy_review_resolve", methods=("POST",))
def waitlist_review_bulk(request: HttpRequest, clinic: Clinic) -> HttpResponse:
    """STAFF: summary first (no change), then on confirm one review per selected vacancy."""
    form = BulkReviewForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(f"{name}: {' '.join(map(str, e))}" for name, e in form.errors.items())
        return console_error(request, 400, f"Select vacancies, a resolution and a reason (5+ characters). {errors}")
    data = form.cleaned_data
    refs = list(dict.fromkeys(data["vacancies"]))
    if not data["confirm"]:
        found = vacancies_by_ref(clinic=clinic, refs=refs)
        summary = [{"ref": ref, "vacancy": found.get(ref)} for ref in refs]
        return render(request, f"{TEMPLATE}#summary", {"clinic": clinic, "form": form, "data": data,
                                                        "refs": refs, "summary": summary})
    results = [_row(clinic, request, ref, data) for ref in refs]
    done = sum(1 for r in results if r["ok"])
    response = render(request, f"{TEMPLATE}#results", {"clinic": clinic, "data": data, "results": results,
                                                        "done": done, "refused": len(results) - done})
    response["HX-Trigger"] = json.dumps({CHANGED_EVENT: True})
    level = "success" if done == len(results) else "error"
    return with_toast(response, f"Reviewed {done} of {len(results)} ({data['resolution']}).", level=level)
