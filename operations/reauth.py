"""Fresh authentication for ADMIN commands in the console (issue 13 part 5).

An ADMIN command (redrive EXECUTE, mode and drain changes, withdraw) runs only if the session signed
in, or re-entered its password, within ``CONSOLE_REAUTH_MINUTES``. Otherwise the user is sent to a
small page that asks for the password again (behind the sign-in throttle) and then back to the
page they were on, where they repeat the command. ``operations.decorators.clinic_view`` applies
this to every ADMIN command, so the views need no change.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from common.clientaddr import client_address

from . import services
from .sessions import auth_age_seconds, mark_authenticated

REAUTH_THROTTLED = "Too many failed attempts. Wait 15 minutes, then try again."


def authenticated_recently(request: HttpRequest) -> bool:
    age = auth_age_seconds(request)
    return age is not None and age <= settings.CONSOLE_REAUTH_MINUTES * 60


def _back_to(request: HttpRequest, clinic) -> str:
    """The page the command was sent from (htmx tells us), else the clinic's home."""
    current = request.headers.get("HX-Current-URL") or request.headers.get("Referer") or ""
    if current and url_has_allowed_host_and_scheme(current, allowed_hosts={request.get_host()}):
        parts = urlsplit(current)
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref})


def reauth_redirect(request: HttpRequest, clinic) -> HttpResponse:
    target = reverse("console:reauth") + "?" + urlencode({"next": _back_to(request, clinic)})
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(target)
    return redirect(target)


def _safe_next(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if not target.startswith("/") and "://" not in target:
        # A bare word is not a URL: ``redirect()`` would try it as a view name (a NoReverseMatch, a 500).
        return reverse("console:index")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return reverse("console:index")


@never_cache
@csrf_protect
@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def reauth_page(request: HttpRequest) -> HttpResponse:
    """Re-enter the password; on success the ADMIN-command clock restarts and the user goes back."""
    context = {"next": _safe_next(request), "minutes": settings.CONSOLE_REAUTH_MINUTES}
    if request.method != "POST":
        return render(request, "operations/reauth.html", context)
    username, ip = request.user.get_username(), client_address(request.META)
    if services.login_is_throttled(username=username, ip=ip):
        return render(request, "operations/reauth.html", {**context, "error": REAUTH_THROTTLED}, status=429)
    user = authenticate(request, username=username, password=request.POST.get("password", ""))
    if user is None or user.pk != request.user.pk:
        services.login_failure_record(username=username, ip=ip, site="reauth")
        return render(request, "operations/reauth.html", {**context, "error": "That password is not correct."})
    services.login_failures_clear(username=username, ip=ip)
    mark_authenticated(request)
    return redirect(context["next"])
