"""The schema endpoint (``/api/schema/``); the schema's content is ``common/schema.py``. A module of its own:
drf-spectacular's views import the schema class that ``common.schema`` defines."""

from __future__ import annotations

import threading

from django.utils import translation
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response


class SchemaView(SpectacularAPIView):
    """``/api/schema/``, generated once per process, language and version, under a lock. It is the same for every
    caller (``SERVE_PUBLIC``) and takes most of a second to generate; and two first generations at once on a
    threaded server raced in drf-spectacular's lazy loading of its extensions (a 500)."""

    _lock = threading.Lock()
    generated: dict[tuple, dict] = {}

    def _get_schema_response(self, request):
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (translation.get_language(), version)
        with self._lock:
            if key not in self.generated:
                generator = self.generator_class(urlconf=self.urlconf, api_version=version, patterns=self.patterns)
                self.generated[key] = generator.get_schema(request=request, public=self.serve_public)
        return Response(
            data=self.generated[key],
            headers={"Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'},
        )
