"""``clinic_view``: the scope and role gate every console view goes through, tested with RequestFactory.

The probe views below stand in for the later ADMIN pages: a refused request must never reach them,
so it can change nothing (here: no audit row is written).
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpResponse
from django.test import RequestFactory
from django.urls import reverse
from django_htmx.middleware import HtmxDetails

from common.models import AuditEntry
from common.services import audit_record
from operations.decorators import clinic_view
from operations.sessions import mark_authenticated
from scheduling.models import Role

pytestmark = pytest.mark.django_db


def _admin_probe(request, clinic):
    """A stand-in ADMIN action: it writes, so reaching it is visible."""
    audit_record(
        actor=request.user, action="probe.execute", clinic=clinic, reason=request.POST.get("reason", "")
    )
    return HttpResponse(f"done {clinic.ref} {clinic.user_role}")


admin_action = clinic_view(Role.ADMIN, methods=("POST",))(_admin_probe)
staff_read = clinic_view()(lambda request, clinic: HttpResponse(clinic.ref))


def make_request(method: str, user, *, htmx: bool = False, data: dict | None = None, signed_in: bool = True):
    """A request from ``user``; ``signed_in`` = the session signed in just now (fresh for ADMIN commands)."""
    factory = RequestFactory()
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    request = getattr(factory, method.lower())("/console/c/x/probe/", data or {}, **headers)
    SessionMiddleware(lambda r: None).process_request(request)
    if signed_in:
        mark_authenticated(request)
    request.user = user
    request.htmx = HtmxDetails(request)
    return request


def test_staff_post_to_an_admin_action_is_403_and_changes_nothing(staff, clinic):
    response = admin_action(make_request("POST", staff, data={"reason": "try it"}), clinic_ref=clinic.ref)
    assert response.status_code == 403
    assert b"ADMIN" in response.content
    assert not AuditEntry.objects.exists()


def test_staff_htmx_post_to_an_admin_action_gets_a_403_toast(staff, clinic):
    response = admin_action(make_request("POST", staff, htmx=True), clinic_ref=clinic.ref)
    assert response.status_code == 403
    assert response["HX-Reswap"] == "none"
    toast = json.loads(response["HX-Trigger"])["console-toast"]
    assert toast["level"] == "error" and "ADMIN" in toast["message"]
    assert not AuditEntry.objects.exists()


def test_admin_post_reaches_the_view_with_the_resolved_clinic(admin, clinic):
    response = admin_action(make_request("POST", admin, data={"reason": "approved"}), clinic_ref=clinic.ref)
    assert response.status_code == 200
    assert response.content.decode() == f"done {clinic.ref} ADMIN"
    entry = AuditEntry.objects.get()
    assert entry.actor == admin and entry.clinic_ref == clinic.ref  # actor from the signed-in user


@pytest.mark.parametrize("ref", ["other-tenant", "cl_unknown"])
def test_out_of_scope_and_unknown_refs_are_404(outsider, clinic, other_tenant_clinic, ref):
    # The outsider is ADMIN of their own clinic: a high role elsewhere is no key to this one.
    clinic_ref = clinic.ref if ref == "other-tenant" else ref
    response = admin_action(make_request("POST", outsider), clinic_ref=clinic_ref)
    assert response.status_code == 404
    assert not AuditEntry.objects.exists()


def test_anonymous_is_sent_to_sign_in(clinic):
    response = admin_action(make_request("POST", AnonymousUser()), clinic_ref=clinic.ref)
    assert response.status_code == 302 and response.url.startswith(reverse("console:login"))
    assert not AuditEntry.objects.exists()


def test_wrong_method_is_405(admin, clinic):
    response = admin_action(make_request("GET", admin), clinic_ref=clinic.ref)
    assert response.status_code == 405
    assert not AuditEntry.objects.exists()


def test_staff_views_admit_staff_and_admin(staff, admin, clinic):
    for user in (staff, admin):
        assert staff_read(make_request("GET", user), clinic_ref=clinic.ref).content.decode() == clinic.ref


def test_decorated_views_expose_their_gate(clinic):
    assert admin_action.console_role == Role.ADMIN and admin_action.console_methods == ("POST",)
    assert staff_read.console_role == Role.STAFF
