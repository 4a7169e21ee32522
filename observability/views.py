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
    """Liveness: the process is up and answering. No dependency is touched, so an outage of the
    database or Redis never gets a healthy process restarted."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request):
    """200 when this process can serve (database, migrations); beat, workers and broker are reported
    in ``background`` whatever their state, and never make it 503."""
    ready, checks, background = health.readiness()
    body = {"status": "ok" if ready else "fail", "checks": checks, "background": background}
    return JsonResponse(body, status=200 if ready else 503)


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
