"""The waitlist controls page: the clinic's switch, its tenant's place on the rollout allowlist, and the
current policy version (version, digest, fields) with an editor that publishes a new version.

Everyone in scope reads it; only ADMIN see and use the forms (the decorator refuses STAFF POSTs). Writes go
through ``waitlist.services`` (which audit with the reason and the form's idempotency key) under
``operations.commands.run_command``, so a double submit shows the first answer instead of acting twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from django.shortcuts import render

from scheduling.models import Clinic
from scheduling.scoping import may_run
from waitlist import services
from waitlist.policy.forms import policy_changes
from waitlist.policy.reads import consent_changes, controls_snapshot

from .commands import run_command
from .decorators import clinic_view
from .forms import ReasonConfirmForm
from .forms_controls import AllowlistForm, ShadowDiscardForm, ShadowPromoteForm, SwitchForm, policy_edit_form
from .responses import HtmxHttpRequest, render_clinic_page, with_toast
from .selectors import shadow_decision

PAGE = "operations/controls.html"


#: The commands of the page, whose forms show only to a user who may run them (``may_run``).
PAGE_COMMANDS = ("waitlist_switch_set", "waitlist_tenant_allow", "policy_change", "shadow_promote", "shadow_discard")


def _context(user, clinic: Clinic, **forms) -> dict:
    snapshot = controls_snapshot(clinic=clinic)
    shadow = shadow_decision(clinic=clinic, policy_fields=snapshot["policy_body"]["fields"])
    may = {command: may_run(user, clinic, command) for command in PAGE_COMMANDS}
    context: dict[str, Any] = {"controls": snapshot, "shadow": shadow, "may": may, "may_change": any(may.values())}
    if shadow and shadow["decidable"]:
        if may["shadow_promote"]:
            context["promote_form"] = forms.get("promote_form") or ShadowPromoteForm()
        if may["shadow_discard"]:
            context["discard_form"] = forms.get("discard_form") or ShadowDiscardForm()
    switch = snapshot["switch"]
    if may["waitlist_switch_set"]:
        context["switch_form"] = forms.get("switch_form") or SwitchForm(
            initial={"state": "off" if switch["clinic_switch"] is False else "on"})
    if may["waitlist_tenant_allow"]:
        context["allowlist_form"] = forms.get("allowlist_form") or AllowlistForm(
            initial={"state": "on" if switch["tenant_allowed"] else "off"})
    if may["policy_change"]:
        context["policy_form"] = forms.get("policy_form") or policy_edit_form(snapshot["policy"])
    return context


def _panel(request: HtmxHttpRequest, clinic: Clinic, context: dict) -> HttpResponse:
    if request.htmx:
        response = render(request, f"{PAGE}#panel", {"clinic": clinic, **context})
        response["HX-Retarget"] = "#controls-panel"
        response["HX-Reswap"] = "outerHTML"
        return response
    return render_clinic_page(request, PAGE, clinic, "controls", context)


@clinic_view()
def controls_page(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    context = {**_context(request.user, clinic), "consent_changes": consent_changes(clinic=clinic)}
    return render_clinic_page(request, PAGE, clinic, "controls", context)


def _submit(request: HtmxHttpRequest, clinic: Clinic, form: ReasonConfirmForm, form_name: str, command: str,
            execute: Callable[[dict], str], target: str = "") -> HttpResponse:
    """Validate, run once per idempotency key, answer with the refreshed panel and a toast."""
    if not form.is_valid():
        return _panel(request, clinic, _context(request.user, clinic, **{form_name: form}))
    data = form.cleaned_data
    parts = [target, *sorted((k, str(v)) for k, v in data.items() if k not in ("confirm", "idempotency_key"))]
    outcome = run_command(request, clinic, command=command, key=data["idempotency_key"], parts=parts,
                          execute=lambda: {"message": execute(data)})
    response = _panel(request, clinic, _context(request.user, clinic))
    if outcome.ok:
        return with_toast(response, outcome.body["message"], level="success")
    return with_toast(response, outcome.message, level="error")


def _rollout_view(command: str, form_class: type[ReasonConfirmForm], form_name: str, label: str, field: str):
    """The console view of one rollout switch (``waitlist_switch_set`` or ``waitlist_tenant_allow``)."""
    service = getattr(services, command)

    @clinic_view(command=command, methods=("POST",))
    def view(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
        def execute(data: dict) -> str:
            state = service(clinic=clinic, actor=request.user, reason=data["reason"],
                            idempotency_key=data["idempotency_key"], system_label="console",
                            **{field: data["state"] == "on"})
            return f"{label} {data['state'].upper()}; effective: {'ON' if state.effective else 'OFF'}."

        return _submit(request, clinic, form_class(request.POST), form_name, command, execute)

    view.__name__ = view.__qualname__ = f"controls_{form_name.removesuffix('_form')}"
    view.__doc__ = f"ADMIN: {label.lower()} on or off (``{command}``, audited with the reason)."
    return view


controls_switch = _rollout_view("waitlist_switch_set", SwitchForm, "switch_form", "Waitlist switch", "enabled")
controls_allowlist = _rollout_view("waitlist_tenant_allow", AllowlistForm, "allowlist_form", "Tenant allowlist",
                                   "allowed")


@clinic_view(command="policy_change", methods=("POST",))
def controls_policy(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    current = services.policy_current(clinic=clinic)
    form = policy_edit_form(current, data=request.POST)

    def execute(data: dict) -> str:
        policy = services.policy_change(clinic=clinic, actor=request.user, reason=data["reason"],
                                        changes=policy_changes(form, current),
                                        expected_version=data["expected_version"],
                                        idempotency_key=data["idempotency_key"], system_label="console")
        return f"Policy version {policy.version} published ({policy.digest()[:12]})."

    return _submit(request, clinic, form, "policy_form", "policy_change", execute)


def _shadow_view(decision: str, form_class: type[ReasonConfirmForm]):
    """ADMIN: promote the observed shadow policy (a new enforced version) or discard it; audited by the service."""
    command = f"shadow_{decision}"

    @clinic_view(command=command, methods=("POST",))
    def view(request: HtmxHttpRequest, clinic: Clinic, shadow_ref: str) -> HttpResponse:
        def execute(data: dict) -> str:
            kwargs = {"clinic": clinic, "shadow_ref": shadow_ref, "actor": request.user, "reason": data["reason"]}
            if decision == "discard":
                return f"Shadow policy {services.shadow_discard(**kwargs).status}."
            _shadow, policy = services.shadow_promote(**kwargs)
            return f"Shadow policy promoted: policy version {policy.version} is enforced ({policy.digest()[:12]})."

        return _submit(request, clinic, form_class(request.POST), f"{decision}_form", command, execute,
                       target=shadow_ref)

    view.__name__ = view.__qualname__ = f"controls_shadow_{decision}"
    view.__doc__ = _shadow_view.__doc__
    return view


controls_shadow_promote = _shadow_view("promote", ShadowPromoteForm)
controls_shadow_discard = _shadow_view("discard", ShadowDiscardForm)
