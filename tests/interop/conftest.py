from tests.observability.conftest import frozen_clock, no_dispatch_tasks  # noqa: F401 - shared fixtures
