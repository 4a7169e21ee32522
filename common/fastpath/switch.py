"""The one switch of the fast paths: ``settings.FASTPATHS`` (env ``FASTPATHS``, default on).

Read at each use (a Django setting, so a test can flip it). Off, every fast path takes the ORM's or Django's
own road; the results are the same, only slower (the suite passes both ways: ``make test FASTPATHS=off``).
"""

from __future__ import annotations

from django.conf import settings


def enabled() -> bool:
    return bool(getattr(settings, "FASTPATHS", True))
