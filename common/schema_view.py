"""The schema endpoint (``/api/schema/``); the schema's content is ``common/schema.py``. A module of its own:
drf-spectacular's views import the schema class that ``common.schema`` defines."""

from __future__ import annotations

import threading

from django.conf import settings
from django.utils import translation
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.response import Response


class SchemaView(SpectacularAPIView):
    """``/api/schema/``, generated once per process and language, under a lock. It is the same for every
    caller (``SERVE_PUBLIC``) and takes most of a second to generate; and two first generations at once on a
    threaded server raced in drf-spectacular's lazy loading of its extensions (a 500)."""

    _lock = threading.Lock()
    generated: dict[str, dict] = {}

    def _get_schema_response(self, request):
        version = self.api_version or request.version or self._get_version_parameter(request)
        if version is not None:  # the API has one schema; an asked-for version is generated, never kept
            return super()._get_schema_response(request)
        try:  # one entry per language the site has, whatever ``?lang=`` says
            key = translation.get_supported_language_variant(translation.get_language())
        except LookupError:
            key = settings.LANGUAGE_CODE
        with self._lock:
            if key not in self.generated:
                with translation.override(key):
                    generator = self.generator_class(urlconf=self.urlconf, api_version=None, patterns=self.patterns)
                    self.generated[key] = generator.get_schema(request=request, public=self.serve_public)
        return Response(
            data=self.generated[key],
            headers={"Content-Disposition": f'inline; filename="{self._get_filename(request, None)}"'},
        )


class SwaggerView(SpectacularSwaggerView):
    """``/api/docs/``: a page, so GET and HEAD only (OPTIONS used to render DRF's metadata through the page's
    template renderer, with no template: a 500)."""

    http_method_names = ["get", "head"]
