"""``GET /api/v1/``: where to go next, so a newcomer needs no guesswork (links, no data)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

#: Per-clinic collections; ``{clinic}`` is a ref from ``clinics``.
CLINIC_LINKS = {
    "practitioners": "clinics/{clinic}/practitioners/",
    "treatments": "clinics/{clinic}/treatments/",
    "resources": "clinics/{clinic}/resources/",
    "patients": "clinics/{clinic}/patients/",
    "appointments": "clinics/{clinic}/appointments/",
    "waitlist_entries": "clinics/{clinic}/waitlist-entries/",
    "vacancy": "clinics/{clinic}/vacancies/{ref}",
    "offer": "clinics/{clinic}/offers/{ref}",
}


class ApiRootView(APIView):
    """Open to anyone: it names endpoints only; each endpoint checks the caller itself."""

    permission_classes = [AllowAny]

    @extend_schema(responses={200: OpenApiResponse(description="{version, links, clinic_links, auth}")})
    def get(self, request):
        base = request.build_absolute_uri("/api/v1/")
        return Response(
            {
                "version": "v1",
                "links": {
                    "self": base,
                    "clinics": base + "clinics/",
                    "ops_waitlist": base + "ops/waitlist?clinic={clinic}",
                    "ops_reevaluation": base + "ops/profile-reevaluation?clinic={clinic}",
                    "schema": request.build_absolute_uri("/api/schema/"),
                    "docs": request.build_absolute_uri("/api/docs/"),
                    "console": request.build_absolute_uri("/console/"),
                },
                "clinic_links": {name: base + path for name, path in CLINIC_LINKS.items()},
                "auth": "Authorization: Token <token> (make run prints the demo tokens), or a console session.",
                "lists": "Lists answer {items, next}; pass next as ?after= for the following page.",
            }
        )
