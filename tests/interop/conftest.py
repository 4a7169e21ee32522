from tests.support.waitlist_fixtures import frozen_clock, no_broker  # noqa: F401 - modules opt in (usefixtures)
