"""The waitlist console page: readiness, fill metrics, the action queue with evidence, a vacancy panel,
and the recovery commands (withdraw, re-dispatch, retry booking, mark reviewed).

Thin views: scope and role through ``clinic_view``, reads through ``waitlist.selectors``, writes through
``waitlist.services`` (which lock, CAS and write the offer events and the audit row). Every write runs
under the form's idempotency key (``common.idempotency.run_idempotent``): a double submit or a replay
shows the first answer. The actor is always ``request.user``, never a form field.

Who may run what (``COMMAND_ROLES``): STAFF run the non-destructive commands (re-dispatch, retry
booking, mark reviewed), ADMIN also withdraw an offer (destructive: the patient may be about to
accept it). STAFF see no withdraw control, and a POST anyway is a 403 from the decorator.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from common.errors import DomainError, NotFound
from common.idempotency import StoredResponse, request_digest, run_idempotent
from common.services import new_correlation_id
from scheduling.models import Clinic, Role
from waitlist import selectors, services

from .decorators import clinic_view
from .forms import WaitlistCommandForm, WaitlistCursorForm, WaitlistReviewForm
from .responses import console_error, render_clinic_page, with_toast

PAGE = "operations/waitlist.html"
PANEL = "operations/waitlist_vacancy.html"
#: Fired after a change so the readiness block and the queue refresh at once (readiness also polls every 15 s).
CHANGED_EVENT = "waitlist-changed"
COMMAND_ROLES: dict[str, Role] = {
    "withdraw": Role.ADMIN,
    "redispatch": Role.STAFF,
    "retry_booking": Role.STAFF,
    "review": Role.STAFF,
}
COMMAND_LABELS = {
    "withdraw": "Withdraw offer",
    "redispatch": "Re-dispatch",
    "retry_booking": "Retry booking",
    "review": "Mark reviewed",
}


#: Red buttons for destructive commands only (the patient may lose an offer); the others are blue.
DESTRUCTIVE_COMMANDS = frozenset({"withdraw"})


def command_tone(name: str) -> str:
    return "danger" if name in DESTRUCTIVE_COMMANDS else "primary"


def queue_page_size() -> int:
    return int(getattr(settings, "CONSOLE_WAITLIST_PAGE_SIZE", 20))


def may_run(clinic: Clinic, command: str) -> bool:
    return clinic.user_role == Role.ADMIN or COMMAND_ROLES[command] == Role.STAFF


#: Each command's route and the URL argument its target ref fills.
COMMAND_URLS = {
    "withdraw": ("console:waitlist-withdraw", "offer_ref"),
    "redispatch": ("console:waitlist-redispatch", "vacancy_ref"),
    "retry_booking": ("console:waitlist-retry-booking", "hold_ref"),
    "review": ("console:waitlist-review", "vacancy_ref"),
}


def _command_url(clinic: Clinic, name: str, target: str) -> str:
    url_name, arg = COMMAND_URLS[name]
    return reverse(url_name, kwargs={"clinic_ref": clinic.ref, arg: target})


def _visible(clinic: Clinic, commands: list[dict]) -> list[dict]:
    """The commands this user may run, labelled; STAFF never see a control they may not use."""
    return [
        {**c, "label": COMMAND_LABELS[c["name"]], "url": _command_url(clinic, c["name"], c["target"]),
         "tone": command_tone(c["name"])}
        for c in commands
        if may_run(clinic, c["name"])
    ]


def _rows(clinic: Clinic, queue: dict) -> dict:
    rows = selectors.ops_queue_evidence(clinic=clinic, items=queue["items"])
    for row in rows:
        row["commands"] = _visible(clinic, row["commands"])
    return {"rows": rows, "next_cursor": queue["next"]}


@clinic_view()
def waitlist_page(request: HttpRequest, clinic: Clinic) -> HttpResponse:
    """The page; htmx asks for ``#wl-readiness`` (poll), ``#wl-queue-rows`` (refresh) or more rows (``after``)."""
    cursor = WaitlistCursorForm(request.GET)
    if not cursor.is_valid():
        return console_error(request, 400, "The cursor is not valid.")
    after, size = cursor.cleaned_data["after"], queue_page_size()
    target = request.htmx.target if request.htmx else None
    if request.htmx and (after or target == "wl-queue-rows"):
        queue = selectors.ops_action_queue(clinic=clinic, limit=size, after=after or None)
        return render(request, f"{PAGE}#queue-rows", {"clinic": clinic, "queue": _rows(clinic, queue)})
    if target == "wl-readiness":  # the poll: readiness and metrics (the queue refreshes on its own)
        snapshot = selectors.ops_snapshot(clinic=clinic, queue_limit=1)
        return render(request, f"{PAGE}#readiness", {"clinic": clinic, "snapshot": snapshot})
    snapshot = selectors.ops_snapshot(clinic=clinic, queue_limit=size)
    queue = selectors.ops_action_queue(clinic=clinic, limit=size, after=after) if after else snapshot["action_queue"]
    context = {"snapshot": snapshot, "queue": _rows(clinic, queue)}
    return render_clinic_page(request, PAGE, clinic, "waitlist", context)


def _panel_context(clinic: Clinic, panel: dict, forms: dict | None = None) -> dict:
    commands = _visible(clinic, panel["commands"])
    for command in commands:
        name = command["name"]
        command["form"] = (forms or {}).get(name) or (
            WaitlistReviewForm() if name == "review" else WaitlistCommandForm(command=name)
        )
    return {"clinic": clinic, "panel": panel, "commands": commands,
            "withdraw_hidden": any(c["name"] == "withdraw" for c in panel["commands"]) and not may_run(
                clinic, "withdraw")}


@clinic_view()
def waitlist_vacancy(request: HttpRequest, clinic: Clinic, vacancy_ref: str) -> HttpResponse:
    """The detail panel of one vacancy (htmx fragment), or the same panel on its own page."""
    try:
        panel = selectors.ops_vacancy_panel(clinic=clinic, vacancy_ref=vacancy_ref)
    except NotFound:
        return console_error(request, 404)
    context = _panel_context(clinic, panel)
    if request.htmx:
        return render(request, f"{PANEL}#detail", context)
    return render_clinic_page(request, PANEL, clinic, "waitlist", context)


# --- commands ---------------------------------------------------------------------------------------


def run_once(request: HttpRequest, clinic: Clinic, *, command: str, key: str, parts: tuple,
         execute: Callable[[], dict]) -> StoredResponse:
    """Once per (clinic, user, key). Domain refusals are answered (and stored), not raised, so records a
    service keeps on refusal (e.g. ``BOOKING_RETRY_FAILED``) are committed; a reused key with another
    request raises ``IdempotencyKeyReused`` (422)."""

    def answer(_receipt):
        try:
            return 200, execute()
        except DomainError as exc:
            return exc.status_code, exc.as_body()

    return run_idempotent(
        scope=f"console:{clinic.ref}:{request.user.pk}",
        key=key,
        command=f"console.waitlist.{command}",
        digest=request_digest(command, *parts),
        execute=answer,
    )


def _command(
    request: HttpRequest, clinic: Clinic, *, name: str, target: str, form: WaitlistCommandForm,
    execute: Callable[[dict, str], dict],
) -> HttpResponse:
    command = {"name": name, "target": target, "label": COMMAND_LABELS[name], "form": form,
               "url": _command_url(clinic, name, target), "tone": command_tone(name)}
    if not form.is_valid():
        return render(request, f"{PANEL}#command-form", {"clinic": clinic, "command": command})
    data = form.cleaned_data
    parts = (target, data["reason"], data.get("resolution", ""))
    correlation_id = new_correlation_id()
    try:
        stored = run_once(request, clinic, command=name, key=data["idempotency_key"], parts=parts,
                      execute=lambda: {**execute(data, correlation_id), "correlation_id": correlation_id})
    except DomainError as exc:  # the key was used for another request
        return console_error(request, exc.status_code, exc.detail)
    body = json.loads(stored.body)
    if stored.status_code != 200:
        return console_error(request, stored.status_code, f"{body.get('code')}: {body.get('detail', '')}")
    # Answer with the whole panel, refreshed, the result on top: the forms of a settled row disappear.
    try:
        panel = selectors.ops_vacancy_panel(clinic=clinic, vacancy_ref=body["vacancy"])
    except NotFound:
        return console_error(request, 404)
    context = {**_panel_context(clinic, panel), "done": command, "result": body, "replayed": stored.replayed}
    response = render(request, f"{PANEL}#detail", context)
    response["HX-Retarget"] = "#wl-detail"
    response["HX-Reswap"] = "innerHTML"
    response["HX-Trigger"] = json.dumps({CHANGED_EVENT: True})
    return with_toast(response, body["message"], level="success")


@clinic_view(Role.ADMIN, methods=("POST",))
def waitlist_withdraw(request: HttpRequest, clinic: Clinic, offer_ref: str) -> HttpResponse:
    """ADMIN: withdraw an OFFERED/ACCEPTED (unbooked) offer (``offer_withdraw``); the cascade follows."""

    def execute(data: dict, correlation_id: str) -> dict:
        offer = services.offer_withdraw(clinic=clinic, offer_ref=offer_ref, actor=request.user,
                                        reason=data["reason"], correlation_id=correlation_id,
                                        idempotency_key=data["idempotency_key"])
        return {"message": f"Offer {offer.ref} is {offer.status}.", "ref": offer.ref, "status": offer.status,
                "vacancy": selectors.ops_vacancy_ref(clinic=clinic, offer_ref=offer.ref)}

    form = WaitlistCommandForm(request.POST, command="withdraw")
    return _command(request, clinic, name="withdraw", target=offer_ref, form=form, execute=execute)


@clinic_view(methods=("POST",))
def waitlist_redispatch(request: HttpRequest, clinic: Clinic, vacancy_ref: str) -> HttpResponse:
    """STAFF: dispatch a vacancy again (``vacancy_redispatch``: at most one active offer ever results)."""

    def execute(data: dict, correlation_id: str) -> dict:
        result = services.vacancy_redispatch(clinic=clinic, vacancy_ref=vacancy_ref, actor=request.user,
                                             reason=data["reason"], correlation_id=correlation_id,
                                             idempotency_key=data["idempotency_key"])
        offer = result.offer.ref if result.offer else None
        suffix = f": offer {offer}" if offer else ""
        return {"message": f"Vacancy {vacancy_ref}: {result.outcome}{suffix}.", "ref": vacancy_ref,
                "status": result.outcome, "offer": offer, "vacancy": vacancy_ref}

    form = WaitlistCommandForm(request.POST, command="redispatch")
    return _command(request, clinic, name="redispatch", target=vacancy_ref, form=form, execute=execute)


@clinic_view(methods=("POST",))
def waitlist_retry_booking(request: HttpRequest, clinic: Clinic, hold_ref: str) -> HttpResponse:
    """STAFF: run the booking command again for an ACCEPTED hold (``hold_retry_booking``)."""

    def execute(data: dict, correlation_id: str) -> dict:
        retried = services.hold_retry_booking(clinic=clinic, hold_ref=hold_ref, actor=request.user,
                                              reason=data["reason"], correlation_id=correlation_id,
                                              idempotency_key=data["idempotency_key"])
        if retried.refusal is not None:
            raise retried.refusal  # the refusal is recorded (and committed) by the command already
        appointment = retried.appointment
        return {"message": f"Hold {hold_ref} booked: appointment {appointment.ref} {appointment.status}.",
                "ref": hold_ref, "status": appointment.status, "appointment": appointment.ref,
                "vacancy": selectors.ops_vacancy_ref(clinic=clinic, hold_ref=hold_ref)}

    form = WaitlistCommandForm(request.POST, command="retry_booking")
    return _command(request, clinic, name="retry_booking", target=hold_ref, form=form, execute=execute)


def review_execute(request: HttpRequest, clinic: Clinic, vacancy_ref: str, data: dict, correlation_id: str) -> dict:
    """Resolve one review (``vacancy_review_resolve``: its own transaction and audit row); the single and
    the bulk command share it."""
    result = services.vacancy_review_resolve(
        clinic=clinic, vacancy_ref=vacancy_ref, actor=request.user, reason=data["reason"],
        resolution=data["resolution"], correlation_id=correlation_id, idempotency_key=data["idempotency_key"],
    )
    offer = result.offer.ref if result.offer else None
    suffix = f": offer {offer}" if offer else ""
    return {"message": f"Review of {vacancy_ref} resolved ({result.resolution}): {result.outcome}{suffix}.",
            "ref": vacancy_ref, "status": result.outcome, "offer": offer, "resolution": result.resolution,
            "vacancy": vacancy_ref}


@clinic_view(methods=("POST",))
def waitlist_review(request: HttpRequest, clinic: Clinic, vacancy_ref: str) -> HttpResponse:
    """STAFF: mark a REVIEW vacancy reviewed, PROMOTE or SKIP (``vacancy_review_resolve``)."""

    def execute(data: dict, correlation_id: str) -> dict:
        return review_execute(request, clinic, vacancy_ref, data, correlation_id)

    return _command(request, clinic, name="review", target=vacancy_ref, form=WaitlistReviewForm(request.POST),
                    execute=execute)
