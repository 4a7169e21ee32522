from tests.support.waitlist_fixtures import (  # noqa: F401 - modules opt in (usefixtures)
    frozen_clock,
    no_broker,
    queued_dispatches,
)
