"""The waitlist controls page: the clinic's switch, its tenant's place on the rollout allowlist, and the
current policy version (version, digest, fields) with an editor that publishes a new version.

Everyone in scope reads it; only ADMIN see and use the forms (the decorator refuses STAFF POSTs). Writes go
through ``waitlist.services`` (which audit with the reason and the form's idempotency key) under
``run_idempotent``, so a double submit shows the first answer instead of acting twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from common.errors import DomainError
from common.idempotency import request_digest, run_idempotent
from scheduling.models import Clinic, Role
from waitlist import services
from waitlist.forms import policy_changes
from waitlist.selectors_controls import consent_changes, controls_snapshot

from .decorators import clinic_view
from .forms import ReasonConfirmForm
from .forms_controls import AllowlistForm, SwitchForm, policy_edit_form
from .responses import HtmxHttpRequest, render_clinic_page, with_toast

PAGE = "operations/controls.html"


def _context(clinic: Clinic, **forms) -> dict:
    snapshot = controls_snapshot(clinic=clinic)
    context: dict[str, Any] = {"controls": snapshot}
    if clinic.user_role == Role.ADMIN:
        switch = snapshot["switch"]
        context["switch_form"] = forms.get("switch_form") or SwitchForm(
            initial={"state": "off" if switch["clinic_switch"] is False else "on"})
        context["allowlist_form"] = forms.get("allowlist_form") or AllowlistForm(
            initial={"state": "on" if switch["tenant_allowed"] else "off"})
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
def controls_page(request: HttpRequest, clinic: Clinic) -> HttpResponse:
    context = {**_context(clinic), "consent_changes": consent_changes(clinic=clinic)}
    return render_clinic_page(request, PAGE, clinic, "controls", context)


def _submit(request: HtmxHttpRequest, clinic: Clinic, form: ReasonConfirmForm, form_name: str, command: str,
            execute: Callable[[dict], str]) -> HttpResponse:
    """Validate, run once per idempotency key, answer with the refreshed panel and a toast."""
    if not form.is_valid():
        return _panel(request, clinic, _context(clinic, **{form_name: form}))
    data = form.cleaned_data

    def answer(_receipt):
        try:
            return 200, {"message": execute(data)}
        except DomainError as exc:
            return exc.status_code, exc.as_body()

    parts = sorted((k, str(v)) for k, v in data.items() if k not in ("confirm", "idempotency_key"))
    try:
        stored = run_idempotent(scope=f"console:{clinic.ref}:{request.user.pk}", key=data["idempotency_key"],
                                command=f"console.{command}", digest=request_digest(command, *parts), execute=answer)
    except DomainError as exc:  # the key was used for another request
        stored_body, ok = exc.as_body(), False
    else:
        stored_body, ok = json.loads(stored.body), stored.status_code == 200
    response = _panel(request, clinic, _context(clinic))
    if ok:
        return with_toast(response, stored_body["message"], level="success")
    return with_toast(response, f"{stored_body.get('code')}: {stored_body.get('detail', '')}", level="error")


@clinic_view(Role.ADMIN, methods=("POST",))
def controls_switch(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    def execute(data: dict) -> str:
        state = services.waitlist_switch_set(clinic=clinic, enabled=data["state"] == "on", actor=request.user,
                                             reason=data["reason"], idempotency_key=data["idempotency_key"],
                                             system_label="console")
        return f"Waitlist switch {data['state'].upper()}; effective: {'ON' if state.effective else 'OFF'}."

    return _submit(request, clinic, SwitchForm(request.POST), "switch_form", "waitlist.switch", execute)


@clinic_view(Role.ADMIN, methods=("POST",))
def controls_allowlist(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    def execute(data: dict) -> str:
        state = services.waitlist_tenant_allow(clinic=clinic, allowed=data["state"] == "on", actor=request.user,
                                               reason=data["reason"], idempotency_key=data["idempotency_key"],
                                               system_label="console")
        return f"Tenant allowlist {data['state'].upper()}; effective: {'ON' if state.effective else 'OFF'}."

    return _submit(request, clinic, AllowlistForm(request.POST), "allowlist_form", "waitlist.allowlist", execute)


@clinic_view(Role.ADMIN, methods=("POST",))
def controls_policy(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    current = services.policy_current(clinic=clinic)
    form = policy_edit_form(current, data=request.POST)

    def execute(data: dict) -> str:
        policy = services.policy_change(clinic=clinic, actor=request.user, reason=data["reason"],
                                        changes=policy_changes(form, current),
                                        expected_version=data["expected_version"],
                                        idempotency_key=data["idempotency_key"], system_label="console")
        return f"Policy version {policy.version} published ({policy.digest()[:12]})."

    return _submit(request, clinic, form, "policy_form", "waitlist.policy", execute)
