"""Console pages (HTML, htmx). Thin: scope through ``clinic_view``, read through selectors."""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.conf import settings
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods, require_POST

from common.clientaddr import client_address
from common.shortcodes import display_code
from scheduling.models import Clinic
from waitlist.figures.operations import entry_activity
from waitlist.figures.trends import daily_trend

from . import services
from .charts import trend_chart
from .decorators import clinic_view
from .forms import AuditFilterForm
from .overview import clinic_counters, console_version
from .responses import HtmxHttpRequest, console_error, render_clinic_page, with_toast
from .search import find_ref, ref_in_clinic
from .selectors import audit_entries_page, console_first_clinic
from .sessions import mark_authenticated
from .templatetags.console import in_zone

THROTTLED_MESSAGE = "Too many failed sign-in attempts. Wait 15 minutes, then try again."


def _client_ip(request: HttpRequest) -> str:
    # X-Forwarded-For only from configured proxies (TRUSTED_PROXIES / NUM_PROXIES).
    return client_address(request.META)


def _throttled_page(request: HttpRequest, context: dict) -> HttpResponse:
    return render(
        request,
        "operations/login.html",
        {**context, "form": AuthenticationForm(request), "throttled": THROTTLED_MESSAGE},
        status=429,
    )


def _safe_next(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if not target.startswith("/") and "://" not in target:
        # A bare word is not a URL: ``redirect()`` would try it as a view name (a NoReverseMatch, a 500).
        return reverse("console:index")
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return reverse("console:index")


@never_cache
@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def console_login(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated and request.method != "POST":
        return redirect(_safe_next(request))
    context = {"next": request.POST.get("next") or request.GET.get("next", "")}
    if request.method != "POST":
        return render(request, "operations/login.html", {**context, "form": AuthenticationForm(request)})

    username, ip = request.POST.get("username", "")[:150], _client_ip(request)
    if services.login_is_throttled(username=username, ip=ip):
        # Checked before the password, so a locked-out guesser learns nothing, even with the right one.
        # (Check-then-count is not atomic: a burst of parallel guesses may pass a few over the limit.)
        return _throttled_page(request, context)
    form = AuthenticationForm(request, data=request.POST)
    if form.is_valid():
        services.login_failures_clear(username=username, ip=ip)
        login(request, form.get_user())
        mark_authenticated(request)
        return redirect(_safe_next(request))
    services.login_failure_record(username=username, ip=ip)
    return render(request, "operations/login.html", {**context, "form": form})


@never_cache
def admin_login(request: HttpRequest) -> HttpResponse:
    """``/admin/login/`` behind the same sign-in throttle as the console (per user name and address)."""
    from django.contrib import admin

    if request.method != "POST":
        return admin.site.login(request)
    username, ip = request.POST.get("username", "")[:150], _client_ip(request)
    if services.login_is_throttled(username=username, ip=ip):
        return _throttled_page(request, {"next": request.GET.get("next", "")})
    response = admin.site.login(request)
    if response.status_code == 302 and request.user.is_authenticated:  # the admin redirects on success
        services.login_failures_clear(username=username, ip=ip)
        mark_authenticated(request)
    else:
        services.login_failure_record(username=username, ip=ip, site="admin")
    return response


@require_POST
def console_logout(request: HttpRequest) -> HttpResponse:
    logout(request)
    return redirect("console:login")


@login_required
@require_http_methods(["GET", "HEAD"])
def console_index(request: HttpRequest) -> HttpResponse:
    clinic = console_first_clinic(user=request.user)
    if clinic is not None:
        return redirect("console:clinic-home", clinic_ref=clinic.ref)
    return render(request, "operations/no_clinics.html")


@clinic_view()
def clinic_home(request: HttpRequest, clinic: Clinic) -> HttpResponse:
    """The overview: what needs attention and what is live, each counter linking to its list."""
    if request.META.get("HTTP_X_CONSOLE_POLL"):  # the counters' poll: 304 while nothing changed
        version = f"{clinic.ref}|home|{console_version(clinic=clinic)}"
        etag = '"' + hashlib.sha256(version.encode()).hexdigest()[:32] + '"'
        if request.headers.get("If-None-Match") == etag:
            return HttpResponseNotModified(headers={"ETag": etag})
        response = render(request, "operations/clinic_home.html#live",
                          {"clinic": clinic, "counters": clinic_counters(clinic=clinic)})
        response["ETag"], response["Cache-Control"] = etag, "private, no-cache"
        patch_vary_headers(response, ("HX-Request", "X-Console-Poll"))
        return response
    context = {"counters": clinic_counters(clinic=clinic), "chart": trend_chart(daily_trend(clinic=clinic))}
    return render_clinic_page(request, "operations/clinic_home.html", clinic, "home", context)


@clinic_view()
def audit_log(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    """The clinic's audit log, newest first. htmx asks for ``#rows`` (load more) or ``#results`` (filter)."""
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        return console_error(request, 400, "The filter is not valid.")
    filters, after = form.filters(), form.cleaned_data["after"]
    page = audit_entries_page(clinic=clinic, after=after, limit=settings.CONSOLE_AUDIT_PAGE_SIZE, **filters)
    context = {
        "form": form, "page": page, "action": filters.get("action", ""), "filters": filters,
        "filter_query": urlencode({k: str(v) for k, v in filters.items()}),
    }
    if request.htmx and after:
        response = render(request, "operations/audit_log.html#rows", {"clinic": clinic, **context})
        if page.next_cursor is None:
            with_toast(response, "That is the oldest entry.")
        return response
    if request.htmx and request.htmx.target == "audit-results":
        return render(request, "operations/audit_log.html#results", {"clinic": clinic, **context})
    return render_clinic_page(request, "operations/audit_log.html", clinic, "audit", context)


@login_required
@require_http_methods(["GET", "HEAD"])
def console_search(request: HttpRequest) -> HttpResponse:
    """Open the object a ref names, in whichever of the user's clinics holds it; else "not found" (404)."""
    query = request.GET.get("q", "").strip()
    hit = find_ref(user=request.user, query=query) if query else None
    if hit is not None:
        return redirect(hit.url)
    return render(request, "operations/search.html", {"query": query}, status=404 if query else 200)


def _ref_rows(hit, clinic: Clinic) -> list[tuple[str, dict]]:
    tz_name = clinic.timezone
    rows = [("clinic", {"text": hit.clinic_ref})]
    for name, value in hit.values.items():
        if name == "code":
            rows.append((name, {"text": display_code(clinic, value) or "—", "code": True}))
        elif isinstance(value, datetime):
            rows.append((name, {"text": in_zone(value, tz_name)}))
        else:
            is_ref = name.endswith("ref") and bool(value)
            rows.append((name, {"text": "—" if value in (None, "") else value, "link": is_ref}))
    return rows


@clinic_view()
def ref_page(request: HttpRequest, clinic: Clinic, ref: str) -> HttpResponse:
    """A ref without a panel of its own (entry, appointment, hold, quarantine case, audit row): its facts."""
    hit = ref_in_clinic(clinic=clinic, user=request.user, ref=ref)
    if hit is None:
        return console_error(request, 404)
    context = {"hit": hit, "rows": _ref_rows(hit, clinic),
               "activity": entry_activity(clinic=clinic, entry_ref=hit.ref)
               if hit.kind == "wle" else None}
    return render_clinic_page(request, "operations/ref_page.html", clinic, "home", context)
