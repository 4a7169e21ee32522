"""The settings package (config/settings/): which module each process loads, and each setting written once."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from config.settings import LOCAL, PRODUCTION, default_module

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ROOT / "config" / "settings"
SECRETS = {
    "DJANGO_SECRET_KEY": "s" * 10 + "a-real-secret-key-of-enough-length",
    "REEVALUATION_HMAC_KEYS": "crm1:a-real-hmac-secret",
    "CRM_API_TOKEN": "a-real-crm-token",
}


def _assigned(path: Path) -> list[str]:
    """The upper-case names a settings module assigns at its top level (in ``if`` blocks too)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
    return names


def test_each_setting_is_written_once_in_base_or_in_the_environments_own_modules():
    base = _assigned(SETTINGS / "base.py")
    assert len(base) == len(set(base)), sorted({n for n in base if base.count(n) > 1})
    for name in ("local.py", "production.py", "test.py"):
        own = _assigned(SETTINGS / name)
        assert len(own) == len(set(own)), (name, own)
        assert not set(own) & set(base), (name, sorted(set(own) & set(base)))
    # What differs between development and production is set by both, so neither inherits the other's.
    assert set(_assigned(SETTINGS / "local.py")) <= set(_assigned(SETTINGS / "production.py"))


def test_django_env_production_picks_the_production_module_else_local():
    assert default_module({"DJANGO_ENV": "production"}) == PRODUCTION
    assert default_module({}) == default_module({"DJANGO_ENV": "development"}) == LOCAL


def _python(code: str, **env_over: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DJANGO_ENV")}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, **env_over},
                          capture_output=True, text=True, timeout=60)


def test_an_entry_point_without_a_settings_module_follows_django_env():
    # config.celery (as manage.py and config.wsgi) sets the default before Django reads the settings.
    code = "import os, config; print(os.environ['DJANGO_SETTINGS_MODULE'])"
    assert _python(code).stdout.strip() == LOCAL
    assert _python(code, DJANGO_ENV="production").stdout.strip() == PRODUCTION


def test_production_has_no_default_secret():
    done = _python("import config.settings.production", DJANGO_ENV="production")
    assert done.returncode != 0 and "DJANGO_SECRET_KEY" in done.stderr


def test_the_development_settings_refuse_django_env_production():
    done = _python("import config.settings.local", DJANGO_ENV="production", **SECRETS)
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and "config.settings.production" in done.stderr


def test_production_turns_on_secure_cookies_and_hsts_and_development_does_not():
    code = ("import importlib, sys; s = importlib.import_module(sys.argv[1]); "
            "print(s.PRODUCTION, getattr(s, 'SESSION_COOKIE_SECURE', False), getattr(s, 'CSRF_COOKIE_SECURE', False), "
            "getattr(s, 'SECURE_HSTS_SECONDS', 0) > 0)")
    prod = subprocess.run([sys.executable, "-c", code, PRODUCTION], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "DJANGO_ENV": "production", **SECRETS}, timeout=60)
    assert prod.stdout.split() == ["True"] * 4, prod.stderr[-2000:]
    local = _python(code.replace("sys.argv[1]", repr(LOCAL)))
    assert local.stdout.split() == ["False"] * 4, local.stderr[-2000:]
