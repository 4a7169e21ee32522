"""The settings modules, as cookiecutter-django lays them out: ``base`` (what every environment shares), and the
three a process runs with: ``local`` (``make run``, ``manage.py`` on a developer machine), ``test`` (pytest,
``pyproject.toml``) and ``production`` (the deployment).

``DJANGO_SETTINGS_MODULE`` names the module; without it ``manage.py``, ``config.wsgi`` and ``config.celery``
take ``default_module()``: ``production`` when ``DJANGO_ENV=production`` (what deploy/ sets), else ``local``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

LOCAL = "config.settings.local"
PRODUCTION = "config.settings.production"
TEST = "config.settings.test"


def default_module(environ: Mapping[str, str] = os.environ) -> str:
    return PRODUCTION if environ.get("DJANGO_ENV", "development") == "production" else LOCAL
