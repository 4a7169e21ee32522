"""A tiny CRM assessment stub for the demo, mounted at /crm-stub/ when ``CRM_STUB_ENABLED``.

Documents are registered by the demo command (``reevaluation_demo``) in the cache; an unknown
ref gets a default document with no constraints. The stub answers only with the contract's fields.
"""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.http import Http404, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.http import require_GET

from reevaluation.assessment import canonical, document_hash

_CACHE_KEY = "crm-stub:assessment:{ref}:{revision}"


def stub_document(
    *,
    assessment_ref: str,
    revision: int,
    constraints: dict | None = None,
    policy_ref: str = "demo-policy",
    policy_generation: int = 1,
) -> dict:
    return {
        "assessmentRef": assessment_ref,
        "profileRevision": revision,
        "policyRef": policy_ref,
        "policyGeneration": policy_generation,
        "constraints": constraints or {},
    }


def stub_register(document: dict, *, timeout: int = 24 * 3600) -> str:
    """Store a document for the stub to serve; returns its ``assessmentHash``."""
    key = _CACHE_KEY.format(ref=document["assessmentRef"], revision=document["profileRevision"])
    cache.set(key, document, timeout)
    return document_hash(document)


@require_GET
def assessment_view(request, assessment_ref: str):
    if not settings.CRM_STUB_ENABLED:
        raise Http404
    if request.headers.get("Authorization") != f"Bearer {settings.CRM_API_TOKEN}":
        return JsonResponse({"code": "NOT_AUTHENTICATED"}, status=401)
    try:
        revision = int(request.GET.get("revision", ""))
    except ValueError:
        return JsonResponse({"code": "VALIDATION_ERROR"}, status=400)
    document = cache.get(_CACHE_KEY.format(ref=assessment_ref, revision=revision))
    if document is None:
        document = stub_document(assessment_ref=assessment_ref, revision=revision)
    return HttpResponse(canonical(document), content_type="application/json")


urlpatterns = [path("assessments/<str:assessment_ref>", assessment_view, name="crm-stub-assessment")]
