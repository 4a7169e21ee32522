"""CORS for the public join contract: an origin is allowed when the clinic in the path lists it
(``JoinSettings.allowed_origins``) and has joining switched on. Connected to django-cors-headers'
``check_request_enabled`` signal by ``WaitlistConfig.ready``."""

from __future__ import annotations

import re

from waitlist.joining.models import JoinSettings

_CLINIC = re.compile(r"^/api/v1/public/clinics/([^/]+)/")


def origin_allowed(sender, request, **kwargs) -> bool:
    match = _CLINIC.match(request.path_info)
    origin = request.headers.get("Origin")
    if match is None or not origin:
        return False
    return JoinSettings.objects.filter(clinic__ref=match.group(1), enabled=True,
                                       allowed_origins__contains=[origin]).exists()
