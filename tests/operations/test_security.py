"""Security headers, a CSP the pages actually comply with, and static files served by the app."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from tests.operations.conftest import make_audit

pytestmark = pytest.mark.django_db

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'"
)


def console_pages(clinic) -> list[str]:
    return [
        reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref}),
        reverse("console:audit", kwargs={"clinic_ref": clinic.ref}),
        reverse("console:clinic-home", kwargs={"clinic_ref": "cl_missing"}),  # the 404 page
    ]


def assert_csp_clean(html: str) -> None:
    """Nothing the policy would block: no inline scripts, styles, handlers or foreign sources."""
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline <script>"
    assert "<style" not in html and " style=" not in html
    assert not re.search(r"\son[a-z]+=", html), "inline event handler"
    assert not re.search(r"""(src|href)=["']https?://""", html), "third-party source"
    assert "hx-on" not in html and "javascript:" not in html


def test_console_pages_carry_the_csp_and_security_headers(staff_web, clinic):
    make_audit(clinic, 2)
    for url in console_pages(clinic) + [reverse("console:login")]:
        response = staff_web.get(url)
        assert response["Content-Security-Policy"] == CSP, url
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"
        assert "camera=()" in response["Permissions-Policy"]
        assert_csp_clean(response.content.decode())


def test_login_page_is_csp_clean_and_not_cached(client):
    response = client.get(reverse("console:login"))
    assert response["Content-Security-Policy"] == CSP
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    assert_csp_clean(response.content.decode())


def test_htmx_is_configured_by_meta_tag_and_loaded_from_self(staff_web, clinic):
    html = staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref})).content.decode()
    assert '<meta name="htmx-config" content=\'{"includeIndicatorStyles": false' in html
    assert '<script src="/static/vendor/htmx.min.js" defer></script>' in html
    assert '<script src="/static/operations/console.js" defer></script>' in html
    assert re.search(r'hx-headers=\'\{"X-CSRFToken": "[A-Za-z0-9]+"\}\'', html)


def test_swagger_ui_is_exempt_from_the_console_csp(client, settings):
    # Its bootstrap script is inline; the exemption is a setting, not a hole in every page.
    assert "/api/docs/" in settings.CONSOLE_CSP_EXEMPT_PATHS
    assert "Content-Security-Policy" not in client.get("/api/docs/")


def test_static_files_are_served_by_the_app_with_debug_off(settings):
    assert settings.DEBUG is False
    client = Client()  # a fresh handler, so WhiteNoise indexes the files under these settings
    for path, kind in [
        ("/static/vendor/htmx.min.js", "javascript"),
        ("/static/operations/console.css", "text/css"),
        ("/static/operations/console.js", "javascript"),
    ]:
        response = client.get(path)
        assert response.status_code == 200, path
        assert kind in response["Content-Type"]
    body = b"".join(Client().get("/static/vendor/htmx.min.js").streaming_content)
    assert b'version:"2.' in body


def test_collectstatic_collects_the_console_assets(settings, tmp_path):
    settings.STATIC_ROOT = tmp_path
    call_command("collectstatic", "--noinput", verbosity=0)
    for name in ("vendor/htmx.min.js", "operations/console.css", "operations/console.js"):
        assert (tmp_path / name).is_file()
        assert (tmp_path / f"{name}.gz").is_file()  # compressed by WhiteNoise's storage
