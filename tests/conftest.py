"""Shared fixtures: a clinic world, users with roles, token clients, and a PII scanner."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from hypothesis import settings as hypothesis_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scheduling.models import Role
from tests import factories as f

# CI runs a fixed, reproducible set of examples; locally hypothesis explores freely.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


@pytest.fixture(scope="session")
def django_db_setup(request, django_test_environment, django_db_blocker, django_db_modify_db_settings):
    """pytest-django's fixture, but each worker's database is a copy of a migrated template
    (tests/support/testdb.py) rather than migrated again per worker and per run."""
    from pytest_django.fixtures import _get_databases_for_setup

    from tests.support.testdb import cloned_databases

    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    with django_db_blocker.unblock():
        with cloned_databases(
            verbosity=request.config.option.verbose, aliases=aliases, serialized_aliases=serialized_aliases
        ):
            yield


@pytest.fixture(autouse=True)
def isolated_cache():
    """Each test gets its own cache key prefix on the shared Redis (throttles, sign-in counters), so
    counts never leak from one test into the next."""
    from django.conf import settings
    from django.test import override_settings

    prefix = f"test-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{uuid.uuid4().hex[:8]}"
    with override_settings(CACHES={"default": {**settings.CACHES["default"], "KEY_PREFIX": prefix}}):
        yield


@pytest.fixture(autouse=True)
def no_new_clinic_quiet_hours(settings, monkeypatch):
    """A new clinic's first policy has quiet hours 21:00-08:00 (the product's default); tests run at instants
    of their own choosing, so they start without them (the servers and workers a test starts too: the
    environment) and publish quiet hours where they test them (``tests/waitlist/test_policy_defaults.py``
    checks the default itself)."""
    settings.WAITLIST_NEW_CLINIC_QUIET_HOURS = ""
    monkeypatch.setenv("WAITLIST_NEW_CLINIC_QUIET_HOURS", "")


#: The loopback receivers tests deliver to (tests/support/servers.py): allowed past the egress guard
#: (common/egress.py) for every test and the servers and workers it starts; tests/common/test_egress.py takes
#: it away to prove the guard refuses loopback.
TEST_EGRESS_ALLOWLIST = ["127.0.0.1/32"]


@pytest.fixture(autouse=True)
def loopback_egress_allowed(settings, monkeypatch):
    settings.EGRESS_ALLOWLIST = list(TEST_EGRESS_ALLOWLIST)
    settings.EGRESS_ALLOW_HTTP = True
    monkeypatch.setenv("EGRESS_ALLOWLIST", ",".join(TEST_EGRESS_ALLOWLIST))
    monkeypatch.setenv("EGRESS_ALLOW_HTTP", "true")


@pytest.fixture(autouse=True)
def fresh_token_cache():
    """The API token cache (common/auth.py) is per process: each test starts with it empty."""
    from common.auth import token_cache_clear

    token_cache_clear()
    yield


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Factories hash a password per user; the production hasher's cost is not what tests test."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def clinic(db):
    return f.ClinicFactory(name="Gangnam Clinic", timezone="Asia/Seoul")


@pytest.fixture
def other_tenant_clinic(db):
    return f.ClinicFactory(name="Elsewhere Clinic", timezone="Europe/London")


@pytest.fixture
def practitioner(clinic):
    return f.PractitionerFactory(clinic=clinic)


@pytest.fixture
def treatment(clinic):
    return f.TreatmentFactory(clinic=clinic, duration_minutes=30)


@pytest.fixture
def resource(clinic):
    return f.ResourceFactory(clinic=clinic)


@pytest.fixture
def patient(clinic):
    return f.PatientFactory(clinic=clinic)


@pytest.fixture
def staff(clinic):
    return f.user_with_role(clinic, Role.STAFF, username="staff-user")


@pytest.fixture
def admin(clinic):
    return f.user_with_role(clinic, Role.ADMIN, username="admin-user")


@pytest.fixture
def outsider(other_tenant_clinic):
    return f.user_with_role(other_tenant_clinic, Role.ADMIN, username="outsider-user")


def token_client(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def staff_client(staff):
    return token_client(staff)


@pytest.fixture
def admin_client(admin):
    return token_client(admin)


@pytest.fixture
def outsider_client(outsider):
    return token_client(outsider)


@pytest.fixture
def anon_client():
    return APIClient()


def seoul(day: int, hour: int, minute: int = 0) -> datetime:
    """A wall-clock time in Seoul on a fixed future December day."""
    return datetime(2030, 12, day, hour, minute, tzinfo=ZoneInfo("Asia/Seoul"))


def race(worker: Callable[[int], object], n: int) -> list:
    """Run ``worker(i)`` in ``n`` threads that start together, each on its own DB connection.

    Returns each thread's result or the exception it raised.
    """
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = worker(i)
        except BaseException as exc:  # noqa: BLE001 - the test inspects what each thread got
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def pii_values(*patients) -> list[str]:
    """The strings that must never leave ``scheduling``'s patient rows."""
    values: list[str] = []
    for p in patients:
        values += [v for v in (p.display_name, p.email, p.phone) if v]
    return values


def assert_no_pii(text: str, patients) -> None:
    for value in pii_values(*patients):
        assert value not in text, f"patient data leaked: {value!r}"


def later(minutes: int) -> timedelta:
    return timedelta(minutes=minutes)


#: The longest test files (``--durations``, summed per file), longest first. ``make test`` runs
#: ``-n 2 --dist loadfile``: xdist hands out whole files in the order of the queue, so a long file
#: handed out last runs alone at the end while the other worker idles. Longest first, the two workers
#: start on the two longest and the short files fill in around them (greedy, longest-first scheduling).
#: Re-measure when a file's cost changes a lot (run with ``--durations=0`` and sum per file).
LONGEST_FILES = (
    "tests/operations/test_browser_console.py",
    "tests/sim/test_simulation.py",
    "tests/test_fuzz.py",
    "tests/test_hostile_routes.py",
    "tests/test_scope_leaks.py",
    "tests/waitlist/test_state_machine.py",
    "tests/observability/test_scale_out.py",
    "tests/operations/test_browser_waitlist.py",
    "tests/operations/test_lists.py",
    "tests/operations/test_browser.py",
    "tests/operations/test_waitlist_page.py",
    "tests/operations/test_browser_reevaluation_safety.py",
    "tests/reevaluation/test_worker.py",
    "tests/waitlist/test_matcher.py",
    "tests/waitlist/test_claim_page.py",
    "tests/waitlist/test_api.py",
    "tests/reevaluation/test_dispatch.py",
    "tests/waitlist/test_offers.py",
    "tests/common/test_state_tables.py",
    "tests/waitlist/test_demo.py",
    "tests/operations/test_privacy.py",
    "tests/waitlist/test_gate.py",
    "tests/operations/test_reevaluation_page.py",
    "tests/waitlist/test_eligibility_parity.py",
    "tests/waitlist/test_races.py",
)


def pytest_configure(config):
    # pytest-xdist 3.x reorders loadfile's queue by number of tests (``--loadscope-reorder``, its
    # default), which put the one-test files above (the state machine, the fuzz run, scale-out) last,
    # whatever LONGEST_FILES said. Keep the collection order below instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FILES)}
    root = str(config.rootpath) + "/"

    def key(item) -> int:
        return rank.get(str(item.path).removeprefix(root), len(LONGEST_FILES))

    items.sort(key=key)  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def fastpaths_on_where_marked(request, settings):
    """A test marked ``fastpaths`` checks a fast path itself (prepared plans, slots): it runs with the fast
    paths on also when the suite runs with them off (``make test FASTPATHS=off``)."""
    if request.node.get_closest_marker("fastpaths"):
        settings.FASTPATHS = True
