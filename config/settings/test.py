"""pytest (``pyproject.toml``) and the servers and workers a test starts: the development settings, and the test
database's name when TEST_DATABASE_NAME gives one (pytest-django's ``test_<name>`` otherwise)."""

from .local import *  # noqa: F403
from .local import DATABASES, env

if env("TEST_DATABASE_NAME", default=""):
    DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_NAME")}
