"""Fixtures for the operability tests (and the FHIR tests, which import them): the shared frozen
clock and broker stub (tests/support/waitlist_fixtures.py), which modules opt into."""

from tests.support.waitlist_fixtures import frozen_clock, no_broker  # noqa: F401 - modules opt in (usefixtures)
