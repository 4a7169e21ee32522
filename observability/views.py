"""Plain Django views (no session, no DRF): probes must stay cheap and reveal nothing."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from . import health, metrics


@never_cache
@require_GET
def healthz(request):
    """The process is up and serving: no dependency is touched."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request):
    ready, checks = health.readiness()
    return JsonResponse({"status": "ok" if ready else "fail", "checks": checks}, status=200 if ready else 503)


@never_cache
@require_GET
def metrics_view(request):
    """Prometheus text format behind a scrape token; anything else is a bare 401."""
    scope = metrics.scope_for_token(request.headers.get("Authorization", ""))
    if scope is None:
        response = HttpResponse("unauthorized\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(metrics.exposition(scope), content_type=CONTENT_TYPE_LATEST)
