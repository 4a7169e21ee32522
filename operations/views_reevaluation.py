"""The reevaluation console page: snapshot, action queue, detail panel, quarantine, redrive and switches.

Thin views: scope and role through ``clinic_view``, reads through ``reevaluation.selectors``, writes
through ``reevaluation.services`` (which check scope and role again). Every write runs under the
form's idempotency key (``operations.commands.run_command``), so a double submit or a replayed
request shows the first answer instead of acting twice. The actor is always ``request.user``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from common.errors import NotFound
from reevaluation import selectors
from reevaluation.modes import readout as selectors_readout
from reevaluation.proposals import selectors as selectors_proposals
from reevaluation.proposals.services import proposal_confirm, proposal_reject
from reevaluation.services import drain_set, mode_set, redrive_execute, redrive_preview
from scheduling.models import Clinic
from scheduling.scoping import may_run

from .commands import refused, run_command
from .decorators import clinic_view
from .forms import (
    CursorForm,
    DrainSetForm,
    ModeSetForm,
    ReasonConfirmForm,
    RedriveExecuteForm,
    RedrivePreviewForm,
    new_idempotency_key,
)
from .responses import HtmxHttpRequest, console_error, render_clinic_page, render_detail, with_toast

PAGE = "operations/reevaluation.html"
ROLLBACK_PAGE = "operations/reevaluation_rollback.html"
JOB_PAGE = "operations/reevaluation_job.html"
#: The snapshot's ``recent_quarantine`` is the quarantine list's first page (10 rows).
QUARANTINE_PAGE_SIZE = 10
#: Fired after a change so the snapshot block refreshes at once (it also polls every 15 s).
CHANGED_EVENT = "reevaluation-changed"


def queue_page_size() -> int:
    return int(getattr(settings, "CONSOLE_REEVALUATION_PAGE_SIZE", 20))


@dataclass(frozen=True)
class Page:
    rows: list[dict]
    #: The ref of the last row shown when more rows exist: the keyset "load more" cursor.
    next_cursor: str | None


def _page(rows: list[dict], size: int, key: str) -> Page:
    """Rows fetched with ``limit=size + 1``: the extra row only tells whether there is more."""
    shown = rows[:size]
    return Page(shown, shown[-1][key] if len(rows) > size and shown else None)


def _switch_forms(user, clinic: Clinic, switches: dict, *, mode_form=None, drain_form=None) -> dict:
    """The forms of the switches ``user`` may set (``may_run``): each starts on the current value and offers only
    the services' allowed moves."""
    forms = {}
    if may_run(user, clinic, "mode_set"):
        forms["mode_form"] = mode_form or ModeSetForm(current=switches["mutation_mode"], moves=switches["mode_moves"])
    if may_run(user, clinic, "drain_set"):
        forms["drain_form"] = drain_form or DrainSetForm(current=switches["drain_state"],
                                                         moves=switches["drain_moves"])
    return forms


@clinic_view()
def reevaluation_page(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    """The page; htmx asks for ``#reeval-snapshot`` (poll), queue rows (``after``) or quarantine rows (``qafter``)."""
    cursors = CursorForm(request.GET)
    qcursors = CursorForm({"after": request.GET.get("qafter", "")})
    if not cursors.is_valid() or not qcursors.is_valid():
        return console_error(request, 400, "The cursor is not valid.")
    after, qafter = cursors.cleaned_data["after"], qcursors.cleaned_data["after"]
    size = queue_page_size()
    try:
        if request.htmx and after:
            queue = _page(selectors.action_queue(clinic=clinic, limit=size + 1, after=after), size, "job")
            return render(request, f"{PAGE}#queue-rows", {"clinic": clinic, "queue": queue})
        if request.htmx and qafter:
            rows = selectors.quarantine_list(clinic=clinic, limit=QUARANTINE_PAGE_SIZE + 1, after=qafter)
            quarantine = _page(rows, QUARANTINE_PAGE_SIZE, "case")
            return render(request, f"{PAGE}#quarantine-rows", {"clinic": clinic, "quarantine": quarantine})
        if request.htmx and request.htmx.target == "queue-rows":
            # After a change (a redrive marks its jobs): the queue's first page again.
            queue = _page(selectors.action_queue(clinic=clinic, limit=size + 1), size, "job")
            return render(request, f"{PAGE}#queue-rows", {"clinic": clinic, "queue": queue})
        snapshot = selectors.snapshot(clinic=clinic, queue_limit=size + 1)
        if request.htmx and request.htmx.target == "reeval-snapshot":
            return render(request, f"{PAGE}#snapshot", {"clinic": clinic, "snapshot": snapshot})
        # Without htmx, "load more" links open the full page starting after the cursor.
        rows = selectors.action_queue(clinic=clinic, limit=size + 1, after=after) if after else snapshot["action_queue"]
        qrows = (
            selectors.quarantine_list(clinic=clinic, limit=QUARANTINE_PAGE_SIZE + 1, after=qafter)
            if qafter
            else snapshot["recent_quarantine"]
        )
    except NotFound:
        return console_error(request, 404)
    quarantine = (
        _page(qrows, QUARANTINE_PAGE_SIZE, "case")
        if qafter
        # The snapshot's first page holds 10 rows; the clinic's case count says whether more exist.
        else Page(qrows, qrows[-1]["case"] if qrows and snapshot["quarantine_count"] > len(qrows) else None)
    )
    switches = selectors.clinic_switches(clinic=clinic, snapshot=snapshot)
    context = {
        "snapshot": snapshot,
        "queue": _page(rows, size, "job"),
        "quarantine": quarantine,
        "changes": selectors.recent_changes(clinic=clinic),
        "switches": switches,
        "preview_form": RedrivePreviewForm(),
        "proposals": _proposal_rows(clinic),
        **_switch_forms(request.user, clinic, switches),
    }
    return render_clinic_page(request, PAGE, clinic, "reevaluation", context)


@clinic_view()
def reevaluation_job(request: HtmxHttpRequest, clinic: Clinic, job_ref: str) -> HttpResponse:
    """The detail panel of one job (htmx), or the same panel on its own page."""
    return render_detail(request, JOB_PAGE, clinic, "reevaluation",
                         lambda: {"job": selectors.job_panel(clinic=clinic, job_ref=job_ref)})


@clinic_view(command="redrive_preview", methods=("POST",))
def reevaluation_preview(request: HttpRequest, clinic: Clinic) -> HttpResponse:
    """PREVIEW (STAFF and ADMIN): the exact jobs an EXECUTE would redrive, frozen under a preview ref."""
    form = RedrivePreviewForm(request.POST)
    if not form.is_valid():
        response = render(request, f"{PAGE}#redrive-form", {"clinic": clinic, "preview_form": form})
        # The form posts into the result area; its errors belong in place of the form itself.
        response["HX-Retarget"] = "#redrive-form"
        response["HX-Reswap"] = "outerHTML"
        return response
    data = form.cleaned_data
    key, reason = data["idempotency_key"], data["reason"]
    target_revision, limit, classes = data["target_revision"], data["limit"], data["failure_classes"]
    include = data["include_non_transient"]

    def execute() -> dict:
        result = redrive_preview(clinic=clinic, actor=request.user, reason=reason, limit=limit,
                                 target_revision=target_revision, failure_classes=classes,
                                 include_non_transient=include, idempotency_key=key)
        return {**result.as_body(), "reason": reason, "target_revision": target_revision, "limit": limit}

    outcome = run_command(
        request, clinic, command="redrive_preview", key=key,
        parts=(target_revision, limit, reason, tuple(classes), include), execute=execute,
    )
    if not outcome.ok:
        return refused(request, outcome)
    preview = outcome.body
    execute_form = None
    may_execute = may_run(request.user, clinic, "redrive_execute")
    if may_execute and preview["count"]:
        execute_form = RedriveExecuteForm(
            initial={"preview": preview["preview"], "reason": preview["reason"]},
            targets=preview["targets"],
            non_transient=preview["includes_non_transient"],
        )
    response = render(
        request,
        f"{PAGE}#preview-result",
        {
            "clinic": clinic,
            "preview": preview,
            "execute_form": execute_form,
            "may_execute": may_execute,
            "replayed": outcome.replayed,
            # A fresh key for the preview form (out of band): the next PREVIEW, say of another
            # failure class, is a new request; a double submit in flight still replays this one.
            "next_key": new_idempotency_key(),
        },
    )
    return with_toast(response, f"Preview: {preview['count']} job(s) would be redriven.")


@clinic_view(command="redrive_execute", methods=("POST",))
def reevaluation_execute(request: HttpRequest, clinic: Clinic) -> HttpResponse:
    """EXECUTE one preview, less the jobs the ADMIN left out (ADMIN only; STAFF get 403 from the
    decorator and nothing runs)."""
    frozen = selectors.preview_targets(clinic=clinic, preview_ref=request.POST.get("preview", ""))
    if frozen is None:
        return console_error(request, 404)
    form = RedriveExecuteForm(request.POST, targets=frozen["targets"], non_transient=frozen["non_transient"])
    if not form.is_valid():
        return render(request, f"{PAGE}#execute-form", {"clinic": clinic, "execute_form": form})
    data = form.cleaned_data
    key, reason, preview_ref = data["idempotency_key"], data["reason"], data["preview"]
    exclude, confirmed = sorted(data["exclude"]), data.get("confirm_non_transient", False)

    def execute() -> dict:
        result = redrive_execute(clinic=clinic, actor=request.user, preview_ref=preview_ref, reason=reason,
                                 exclude=exclude, confirm_non_transient=confirmed, idempotency_key=key)
        return {"preview": preview_ref, **result.as_body()}

    outcome = run_command(
        request, clinic, command="redrive_execute", key=key, parts=(preview_ref, reason, tuple(exclude), confirmed),
        execute=execute,
    )
    if not outcome.ok:
        return refused(request, outcome)
    result = outcome.body
    response = render(
        request, f"{PAGE}#execute-result", {"clinic": clinic, "result": result, "replayed": outcome.replayed}
    )
    response["HX-Trigger"] = json.dumps({CHANGED_EVENT: True})
    message = (
        f"Redriven {result['count']} job(s), skipped {result['skipped_count']},"
        f" left out {len(result['excluded'])}."
    )
    return with_toast(response, message, level="success")


def _switch_response(request: HttpRequest, clinic: Clinic, partial: str, **forms) -> HttpResponse:
    switches = selectors.clinic_switches(clinic=clinic)
    context = {"clinic": clinic, "switches": switches, **_switch_forms(request.user, clinic, switches, **forms)}
    return render(request, f"{PAGE}#{partial}", context)


def _switch(request: HttpRequest, clinic: Clinic, command: str) -> HttpResponse:
    """Set the mutation mode (``mode_set``) or the drain state (``drain_set``); the service audits."""
    spec = SWITCHES[command]
    switches = selectors.clinic_switches(clinic=clinic)
    form = spec.form(request.POST, current=switches[spec.current], moves=switches[spec.moves])
    if not form.is_valid():
        return _switch_response(request, clinic, spec.partial, **{spec.form_name: form})
    data = form.cleaned_data
    key, reason, value = data["idempotency_key"], data["reason"], data[spec.field]

    def execute() -> dict:
        row = spec.service(clinic=clinic, actor=request.user, reason=reason, idempotency_key=key,
                           **{spec.field: value})
        return {"mutation_mode": row.mutation_mode, "drain_state": row.drain_state}

    outcome = run_command(request, clinic, command=command, key=key, parts=(value, reason), execute=execute)
    if not outcome.ok:
        return refused(request, outcome)
    response = _switch_response(request, clinic, spec.partial)
    response["HX-Trigger"] = json.dumps({CHANGED_EVENT: True})
    return with_toast(response, f"{spec.label} is now {outcome.body[spec.current]}.", level="success")


@dataclass(frozen=True)
class _SwitchSpec:
    form: type
    form_name: str
    partial: str
    field: str
    #: The keys of ``clinic_switches`` with the current value and the allowed moves.
    current: str
    moves: str
    service: Callable
    label: str


SWITCHES = {
    "mode_set": _SwitchSpec(ModeSetForm, "mode_form", "mode-switch", "mode", "mutation_mode", "mode_moves",
                            mode_set, "Mutation mode"),
    "drain_set": _SwitchSpec(DrainSetForm, "drain_form", "drain-switch", "state", "drain_state", "drain_moves",
                             drain_set, "Drain state"),
}


@clinic_view(command="mode_set", methods=("POST",))
def reevaluation_mode(request: HttpRequest, clinic: Clinic) -> HttpResponse:
    """Set the clinic's mutation mode through ``mode_set`` (which writes the audit row)."""
    return _switch(request, clinic, "mode_set")


@clinic_view(command="drain_set", methods=("POST",))
def reevaluation_drain(request: HttpRequest, clinic: Clinic) -> HttpResponse:
    """Set the clinic's drain state through ``drain_set`` (which writes the audit row)."""
    return _switch(request, clinic, "drain_set")


# --- proposals to patients (issue 28) -----------------------------------------------------------------


class ProposalDecisionForm(ReasonConfirmForm):
    """An operator's confirmation or rejection of one proposal: a reason, an explicit check, the key."""

    def __init__(self, *args, proposal_ref: str = "", command: str = "proposal_confirm", **kwargs):
        # Ids unique per row; only ref-safe characters (a "%" in a hostile ref would be a format spec).
        safe = re.sub(r"[^A-Za-z0-9_-]", "", proposal_ref)[:40]
        kwargs.setdefault("auto_id", f"id_{command}_{safe}_%s")
        super().__init__(*args, **kwargs)
        self.fields["confirm"].label = (
            "The patient chose this time; swap the confirmed visit now." if command == "proposal_confirm"
            else "Decline this proposal; the patient's appointment stays as it is."
        )


def _proposal_rows(clinic: Clinic) -> list[dict]:
    """Live proposals, each awaiting one with its confirm and reject forms (STAFF may run both)."""
    rows = selectors_proposals.proposal_list(clinic=clinic, limit=20)
    for row in rows:
        ref = row["proposal"]
        row["reject_form"] = ProposalDecisionForm(proposal_ref=ref, command="proposal_reject")
        if row["awaiting_operator"]:
            row["confirm_form"] = ProposalDecisionForm(proposal_ref=ref, command="proposal_confirm")
    return rows


def _proposal_decision(request: HttpRequest, clinic: Clinic, proposal_ref: str, command: str) -> HttpResponse:
    form = ProposalDecisionForm(request.POST, proposal_ref=proposal_ref, command=command)
    if not form.is_valid():
        return render(request, f"{PAGE}#proposal-form",
                      {"clinic": clinic, "form": form, "proposal_ref": proposal_ref, "command": command})
    key, reason = form.cleaned_data["idempotency_key"], form.cleaned_data["reason"]
    service = proposal_confirm if command == "proposal_confirm" else proposal_reject

    def execute() -> dict:
        proposal = service(clinic=clinic, proposal_ref=proposal_ref, actor=request.user, reason=reason,
                           idempotency_key=key)
        return {"proposal": proposal.ref, "state": proposal.state,
                "result_appointment": proposal.result_appointment_ref or None}

    outcome = run_command(request, clinic, command=command, key=key, parts=(proposal_ref, reason), execute=execute)
    if not outcome.ok:
        return refused(request, outcome)
    response = render(request, f"{PAGE}#proposal-result",
                      {"clinic": clinic, "result": outcome.body, "replayed": outcome.replayed})
    response["HX-Trigger"] = json.dumps({CHANGED_EVENT: True})
    return with_toast(response, f"Proposal {proposal_ref} is now {outcome.body['state']}.", level="success")


@clinic_view(command="proposal_confirm", methods=("POST",))
def reevaluation_proposal_confirm(request: HttpRequest, clinic: Clinic, proposal_ref: str) -> HttpResponse:
    """Confirm the time the patient accepted: ``proposal_confirm`` swaps the CONFIRMED visit atomically and audits."""
    return _proposal_decision(request, clinic, proposal_ref, "proposal_confirm")


@clinic_view(command="proposal_reject", methods=("POST",))
def reevaluation_proposal_reject(request: HttpRequest, clinic: Clinic, proposal_ref: str) -> HttpResponse:
    """Decline a live proposal: ``proposal_reject`` releases its holds; the appointment stays; audited."""
    return _proposal_decision(request, clinic, proposal_ref, "proposal_reject")


@clinic_view()
def reevaluation_rollback(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    """The rollback readout panel (htmx, loaded when revealed), or the same panel on its own page."""
    return render_detail(request, ROLLBACK_PAGE, clinic, "reevaluation",
                         lambda: {"readout": selectors_readout.rollback_readout(clinic=clinic)})
