"""The waitlist console page: readiness, fill metrics, the action queue with evidence, a vacancy panel,
and the recovery commands (withdraw, re-dispatch, retry booking, mark reviewed).

Thin views: scope and role through ``clinic_view``, reads through ``waitlist.selectors``, writes through
``waitlist.services`` (which lock, CAS and write the offer events and the audit row). Every write runs
under the form's idempotency key (``operations.commands.run_command``): a double submit or a replay
shows the first answer. The actor is always ``request.user``, never a form field.

Who may run what is ``scheduling.scoping.COMMAND_ROLES`` (the API and the shell read it too): STAFF run
the non-destructive commands (re-dispatch, retry booking, mark reviewed), ADMIN also withdraw an offer
(destructive: the patient may be about to accept it). STAFF see no withdraw control, and a POST anyway
is a 403 from the decorator.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from common.errors import NotFound
from common.services import new_correlation_id
from interop.models import NOTIFICATION_TOPIC
from scheduling.models import Clinic
from scheduling.scoping import may_run
from waitlist import services
from waitlist.dispatch.reads import dispatch_reasons
from waitlist.figures.operations import open_vacancies_soon, ops_snapshot
from waitlist.figures.over_time import pictures_kept
from waitlist.figures.panels import ops_queue_evidence, ops_vacancy_panel, ops_vacancy_ref
from waitlist.figures.queue import ops_action_queue
from waitlist.joining.models import UpkeepOutcome
from waitlist.joining.upkeep import upkeep_counts
from waitlist.selectors import vacancy_detail

from .charts import fairness_chart, fill_chart
from .commands import refused, run_command
from .decorators import clinic_view
from .forms import WaitlistCommandForm, WaitlistCursorForm, WaitlistReviewForm
from .labels import code_label, queue_action
from .live import attention_count, live_response, live_seconds, render_fragment
from .responses import HtmxHttpRequest, console_error, render_clinic_page, render_detail, with_toast
from .selectors import offers_in_flight

PAGE = "operations/waitlist.html"
PANEL = "operations/waitlist_vacancy.html"
#: Fired after a change so the readiness block and the queue refresh at once (readiness also polls every 15 s).
CHANGED_EVENT = "waitlist-changed"
#: Each console command's name in ``scheduling.scoping.COMMAND_ROLES`` (its service's name).
COMMANDS = {
    "withdraw": "offer_withdraw",
    "redispatch": "vacancy_redispatch",
    "retry_booking": "hold_retry_booking",
    "review": "vacancy_review_resolve",
}
COMMAND_LABELS = {
    "withdraw": "Withdraw offer",
    "redispatch": "Re-dispatch",
    "retry_booking": "Retry booking",
    "review": "Mark reviewed",
}


#: What each command does, in the words the confirmation shows beside its target.
COMMAND_EFFECTS = {
    "withdraw": "The patient's offer ends now, its hold is released and the slot goes to the next candidate.",
    "redispatch": "Looks for the next candidate now; at most one offer is sent.",
    "retry_booking": "Runs the booking again for the hold the patient accepted.",
    "review": "Promote offers the slot to this candidate; Skip moves on to the next one.",
}


def command_effect(name: str, target: str | None) -> str:
    return f"Target: {target}. {COMMAND_EFFECTS[name]}"


#: Red buttons for destructive commands only (the patient may lose an offer); the others are blue.
DESTRUCTIVE_COMMANDS = frozenset({"withdraw"})


def command_tone(name: str) -> str:
    return "danger" if name in DESTRUCTIVE_COMMANDS else "primary"


def queue_page_size() -> int:
    return int(getattr(settings, "CONSOLE_WAITLIST_PAGE_SIZE", 20))


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


def _visible(user, clinic: Clinic, commands: list[dict]) -> list[dict]:
    """The commands this user may run, labelled; STAFF never see a control they may not use."""
    return [
        {**c, "label": COMMAND_LABELS[c["name"]], "url": _command_url(clinic, c["name"], c["target"]),
         "tone": command_tone(c["name"]), "effect": command_effect(c["name"], c["target"])}
        for c in commands
        if may_run(user, clinic, COMMANDS[c["name"]])
    ]


#: Where a row without a console command is dealt with (the admin's notification settings, the notifications).
TODO_LINKS = {
    "PROVIDER_FAILING": lambda clinic, row: reverse("admin:scheduling_clinic_change", args=[clinic.pk]),
    "SUBSCRIPTION_ERROR": lambda clinic, row: reverse("admin:common_outboxmessage_changelist")
    + f"?topic={NOTIFICATION_TOPIC}",
}


def _todo(clinic: Clinic, row: dict) -> dict | None:
    """What to do about a row, in words, and a link to where it is done (None: the commands say it)."""
    text = queue_action(row["kind"])
    if not text or row["commands"]:
        return None
    link = TODO_LINKS.get(row["kind"])
    return {"text": text, "url": link(clinic, row) if link else None}


def _rows(user, clinic: Clinic, queue: dict) -> dict:
    rows = ops_queue_evidence(clinic=clinic, items=queue["items"])
    for row in rows:
        row["commands"] = _visible(user, clinic, row["commands"])
        row["todo"] = _todo(clinic, row)
    return {"rows": rows, "next_cursor": queue["next"]}


#: The upkeep questions' outcomes in the card's words (the ``/metrics`` gauge ``waitlist_upkeep_questions``).
UPKEEP_LABELS = {
    UpkeepOutcome.ASKED: "Asked, no answer yet",
    UpkeepOutcome.STILL_NEEDED: "Confirmed (still needed)",
    UpkeepOutcome.NOT_NEEDED: "Withdrawn (not needed)",
    UpkeepOutcome.PAUSED: "Paused (no answer in time)",
}


def upkeep_card(clinic: Clinic) -> list[dict]:
    """The clinic's upkeep questions by outcome, every outcome shown (0 included): one query."""
    counts = upkeep_counts([clinic.pk]).get(clinic.pk, {})
    return [{"outcome": outcome, "label": label, "count": counts.get(outcome, 0),
             "quiet": outcome == UpkeepOutcome.ASKED} for outcome, label in UPKEEP_LABELS.items()]


def pictures(clinic: Clinic) -> dict:
    series = pictures_kept(clinic=clinic)
    return {"fill": fill_chart(series["fill"]), "fairness": fairness_chart(series["fairness"])}


#: The live fragments of the page (``?live=<name>``): each polls every ``live_seconds()`` and swaps only when changed.
LIVE_FRAGMENTS = {"queue": f"{PAGE}#queue-rows", "soon": f"{PAGE}#soon", "offers": f"{PAGE}#in-flight"}


def _live_context(request: HtmxHttpRequest, clinic: Clinic, name: str, queue: dict | None = None) -> dict:
    if name == "queue":
        return {"clinic": clinic, "queue": queue or _rows(request.user, clinic, ops_action_queue(
            clinic=clinic, limit=queue_page_size()))}
    if name == "soon":
        return {"clinic": clinic, "soon": open_vacancies_soon(clinic=clinic)}
    return {"clinic": clinic, "in_flight": offers_in_flight(clinic=clinic)}


@clinic_view()
def waitlist_page(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    """The page; htmx asks for ``#wl-readiness`` (poll), a live fragment (``live``) or more rows (``after``)."""
    cursor = WaitlistCursorForm(request.GET)
    if not cursor.is_valid():
        return console_error(request, 400, "The cursor is not valid.")
    after, size = cursor.cleaned_data["after"], queue_page_size()
    target = request.htmx.target if request.htmx else None
    live = request.GET.get("live", "")
    if live in LIVE_FRAGMENTS and not after:
        fragment = _live_context(request, clinic, live)
        return live_response(request, LIVE_FRAGMENTS[live], fragment,
                             attention=attention_count(fragment["queue"]) if live == "queue" else None)
    if request.htmx and (after or target == "wl-queue-rows"):
        queue = ops_action_queue(clinic=clinic, limit=size, after=after or None)
        return render(request, f"{PAGE}#queue-rows", {"clinic": clinic, "queue": _rows(request.user, clinic, queue)})
    if target == "wl-readiness":  # the poll: readiness and metrics (the queue refreshes on its own)
        snapshot = ops_snapshot(clinic=clinic, queue_limit=1)
        return render(request, f"{PAGE}#readiness", {"clinic": clinic, "snapshot": snapshot})
    snapshot = ops_snapshot(clinic=clinic, queue_limit=size)
    queue = ops_action_queue(clinic=clinic, limit=size, after=after) if after else snapshot["action_queue"]
    rows = _rows(request.user, clinic, queue)
    context: dict = {"snapshot": snapshot, "queue": rows, "live_seconds": live_seconds(),
                     "attention": attention_count(rows), "upkeep": upkeep_card(clinic), "pictures": pictures(clinic)}
    for name, template in LIVE_FRAGMENTS.items():
        fragment = _live_context(request, clinic, name, queue=rows)
        context.update({k: v for k, v in fragment.items() if k != "clinic"})
        context[f"{name}_etag"] = render_fragment(request, template, fragment)[1]
    return render_clinic_page(request, PAGE, clinic, "waitlist", context)


def _panel_context(user, clinic: Clinic, panel: dict, forms: dict | None = None) -> dict:
    commands = _visible(user, clinic, panel["commands"])
    for command in commands:
        name = command["name"]
        command["form"] = (forms or {}).get(name) or (
            WaitlistReviewForm() if name == "review" else WaitlistCommandForm(command=name)
        )
    return {"clinic": clinic, "panel": panel, "commands": commands,
            "withdraw_hidden": any(c["name"] == "withdraw" for c in panel["commands"]) and not may_run(
                user, clinic, COMMANDS["withdraw"])}


@clinic_view()
def waitlist_vacancy(request: HtmxHttpRequest, clinic: Clinic, vacancy_ref: str) -> HttpResponse:
    """The detail panel of one vacancy (htmx fragment), or the same panel on its own page."""
    # ``?command=withdraw``: the queue's command button opens that command's disclosure at once.
    return render_detail(request, PANEL, clinic, "waitlist", lambda: {**_panel_context(
        request.user, clinic, ops_vacancy_panel(clinic=clinic, vacancy_ref=vacancy_ref)),
        "open_command": request.GET.get("command", "")})


# --- commands ---------------------------------------------------------------------------------------


def run_once(request: HttpRequest, clinic: Clinic, *, command: str, data: dict, target: str,
             execute: Callable[[dict, str], dict]):
    """``execute(data, correlation_id)`` once per idempotency key (``operations.commands``); its answer
    carries the correlation id. The single commands and the bulk review share it."""
    correlation_id = new_correlation_id()
    return run_command(
        request, clinic, command=COMMANDS[command], key=data["idempotency_key"],
        parts=(target, data["reason"], data.get("resolution", "")),
        execute=lambda: {**execute(data, correlation_id), "correlation_id": correlation_id},
    )


def _command(
    request: HttpRequest, clinic: Clinic, *, name: str, target: str, form: WaitlistCommandForm,
    execute: Callable[[dict, str], dict],
) -> HttpResponse:
    command = {"name": name, "target": target, "label": COMMAND_LABELS[name], "form": form,
               "url": _command_url(clinic, name, target), "tone": command_tone(name),
               "effect": command_effect(name, target)}
    if not form.is_valid():
        return render(request, f"{PANEL}#command-form", {"clinic": clinic, "command": command})
    outcome = run_once(request, clinic, command=name, data=form.cleaned_data, target=target, execute=execute)
    if not outcome.ok:
        return refused(request, outcome)
    body = outcome.body
    # Answer with the whole panel, refreshed, the result on top: the forms of a settled row disappear.
    try:
        panel = ops_vacancy_panel(clinic=clinic, vacancy_ref=body["vacancy"])
    except NotFound:
        return console_error(request, 404)
    context = {**_panel_context(request.user, clinic, panel), "done": command, "result": body,
               "replayed": outcome.replayed}
    response = render(request, f"{PANEL}#detail", context)
    response["HX-Retarget"] = "#wl-detail"
    response["HX-Reswap"] = "innerHTML"
    response["HX-Trigger"] = json.dumps({CHANGED_EVENT: True})
    level = "warning" if body.get("status") in UNFILLED_OUTCOMES else "success"
    return with_toast(response, body["message"], level=level)


def _command_view(name: str, call: Callable[..., dict], doc: str):
    """The console view of one waitlist command: its role from ``COMMAND_ROLES``, POST only.

    ``call(clinic, target, actor, data, correlation_id)`` runs the service and shapes the answer.
    """

    @clinic_view(command=COMMANDS[name], methods=("POST",))
    def view(request: HttpRequest, clinic: Clinic, **kwargs) -> HttpResponse:
        target = kwargs[COMMAND_URLS[name][1]]
        form = WaitlistReviewForm(request.POST) if name == "review" else WaitlistCommandForm(
            request.POST, command=name)

        def execute(data: dict, correlation_id: str) -> dict:
            return call(clinic, target, request.user, data, correlation_id)

        return _command(request, clinic, name=name, target=target, form=form, execute=execute)

    view.__name__ = view.__qualname__ = f"waitlist_{name}"
    view.__doc__ = doc
    return view


def _service_args(actor, data: dict, correlation_id: str) -> dict:
    return {"actor": actor, "reason": data["reason"], "correlation_id": correlation_id,
            "idempotency_key": data["idempotency_key"]}


def _withdraw(clinic: Clinic, offer_ref: str, actor, data: dict, correlation_id: str) -> dict:
    offer = services.offer_withdraw(clinic=clinic, offer_ref=offer_ref, **_service_args(actor, data, correlation_id))
    return {"message": f"Offer {offer.ref} is {offer.status}.", "ref": offer.ref, "status": offer.status,
            "vacancy": ops_vacancy_ref(clinic=clinic, offer_ref=offer.ref)}


def _redispatch(clinic: Clinic, vacancy_ref: str, actor, data: dict, correlation_id: str) -> dict:
    result = services.vacancy_redispatch(clinic=clinic, vacancy_ref=vacancy_ref,
                                         **_service_args(actor, data, correlation_id))
    offer = result.offer.ref if result.offer else None
    vacancy, _active = vacancy_detail(clinic=clinic, ref=vacancy_ref)
    reasons = dispatch_reasons(clinic=clinic, vacancy=vacancy, stats=result.stats)
    return {"message": redispatch_message(vacancy_ref, result.outcome, offer, reasons), "ref": vacancy_ref,
            "status": result.outcome, "offer": offer, "vacancy": vacancy_ref, "reasons": reasons}


#: Outcomes of a dispatch that leave the slot without an offer: shown as a warning, with their reasons.
UNFILLED_OUTCOMES = frozenset({"NO_CANDIDATE", "WAITING", "STAFF_REVIEW"})


def redispatch_message(vacancy_ref: str, outcome: str, offer: str | None, reasons: dict) -> str:
    """The result in words: the outcome, the offer made, or why none was (pass-over counts, waiting until)."""
    words = f"Vacancy {vacancy_ref}: {code_label(outcome)} ({outcome})"
    if offer:
        return f"{words}: offer {offer}."
    why = [f"{r['entries']} × {code_label(r['reason_code'])}" for r in reasons["passed_over"]]
    if reasons["waiting"]:
        why.insert(0, f"waiting: {code_label(reasons['waiting']['reason'])} until {reasons['waiting']['until'] or '—'}")
    return f"{words}. " + ("; ".join(why) if why else "No entry on the waiting list matches this slot.")


def _retry_booking(clinic: Clinic, hold_ref: str, actor, data: dict, correlation_id: str) -> dict:
    # A refusal is recorded and committed by the command already; raised here, the runner stores it.
    appointment = services.hold_retry_booking(clinic=clinic, hold_ref=hold_ref,
                                              **_service_args(actor, data, correlation_id)).booked()
    return {"message": f"Hold {hold_ref} booked: appointment {appointment.ref} {appointment.status}.",
            "ref": hold_ref, "status": appointment.status, "appointment": appointment.ref,
            "vacancy": ops_vacancy_ref(clinic=clinic, hold_ref=hold_ref)}


_STANDING_SAYS = {
    "BOOKED": ", booked at once on the patient's standing acceptance",
    "POLICY_OFF": "; the patient's standing acceptance did not apply (the clinic's policy has it off)",
    "MIN_NOTICE": "; the patient's standing acceptance did not apply (the slot is inside their minimum notice)",
}


def review_execute(clinic: Clinic, vacancy_ref: str, actor, data: dict, correlation_id: str) -> dict:
    """Resolve one review (``vacancy_review_resolve``: its own transaction and audit row); the single and
    the bulk command share it."""
    result = services.vacancy_review_resolve(clinic=clinic, vacancy_ref=vacancy_ref, resolution=data["resolution"],
                                             **_service_args(actor, data, correlation_id))
    offer = result.offer.ref if result.offer else None
    suffix = f": offer {offer}" if offer else ""
    suffix += _STANDING_SAYS.get(result.standing, "")
    return {"message": f"Review of {vacancy_ref} resolved ({result.resolution}): {result.outcome}{suffix}.",
            "ref": vacancy_ref, "status": result.outcome, "offer": offer, "resolution": result.resolution,
            "vacancy": vacancy_ref}


waitlist_withdraw = _command_view(
    "withdraw", _withdraw,
    "ADMIN: withdraw an OFFERED/ACCEPTED (unbooked) offer (``offer_withdraw``); the cascade follows.")
waitlist_redispatch = _command_view(
    "redispatch", _redispatch,
    "STAFF: dispatch a vacancy again (``vacancy_redispatch``: at most one active offer ever results).")
waitlist_retry_booking = _command_view(
    "retry_booking", _retry_booking,
    "STAFF: run the booking command again for an ACCEPTED hold (``hold_retry_booking``).")
waitlist_review = _command_view(
    "review", review_execute, "STAFF: mark a REVIEW vacancy reviewed, PROMOTE or SKIP (``vacancy_review_resolve``).")
