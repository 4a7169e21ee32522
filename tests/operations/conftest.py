"""Console fixtures: a cache namespace per test, signed-in clients and audit rows."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from common.services import audit_record
from scheduling.models import Role
from scheduling.services import clinic_grant_role
from tests import factories as f
from tests.support.waitlist_fixtures import frozen_clock, no_broker  # noqa: F401 - modules opt in (usefixtures)
from tests.worlds import waitlist_world


@pytest.fixture(autouse=True)
def isolated_cache(settings):
    """Give each test its own key prefix in the real (Redis) cache, so throttle counters never leak
    between tests or between xdist workers, and nothing has to be flushed."""
    caches = {name: dict(conf) for name, conf in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = f"test-{uuid.uuid4().hex}"
    settings.CACHES = caches


@pytest.fixture
def world(clinic, staff):
    """A waitlist world in the ``clinic`` fixture's clinic, with the ``staff`` user as its staff."""
    return waitlist_world(clinic, staff)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def staff_web(staff):
    return signed_in(staff)


@pytest.fixture
def admin_web(admin):
    return signed_in(admin)


@pytest.fixture
def outsider_web(outsider):
    return signed_in(outsider)


@pytest.fixture
def second_clinic(clinic, staff):
    """Another clinic of the same tenant group where the staff user also works."""
    other = f.ClinicFactory(name="Bundang Clinic", tenant_group=clinic.tenant_group, timezone="Asia/Seoul")
    clinic_grant_role(clinic=other, user=staff, role=Role.STAFF)
    return other


def make_audit(clinic, n: int, *, action: str = "offer.withdraw", actor=None, **kwargs) -> list:
    return [
        audit_record(
            actor=actor,
            action=action,
            clinic=clinic,
            target_ref=kwargs.get("target_ref", f"off_target{i:04d}"),
            reason=kwargs.get("reason", f"reason {i}"),
            idempotency_key=f"idem-{action}-{i:04d}",
            result=kwargs.get("result", {"status": "WITHDRAWN", "n": i}),
            system_label="tests",
        )
        for i in range(n)
    ]


# One definition of the browser fixtures per process (a second Playwright session in the same
# process would fail inside the first one's event loop).
from tests.operations.browser_support import browser, chromium_executable, open_page  # noqa: E402, F401
