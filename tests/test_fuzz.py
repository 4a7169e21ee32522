"""A short Schemathesis run (a few hundred requests) against a live server: 0 5xx, 0 schema violations.

``make fuzz`` is the long version (at least 10,000 requests against gunicorn); see tests/support/fuzz.py.
"""

from __future__ import annotations

import pytest

from tests.support.fuzz import run_schemathesis, seed_world


@pytest.mark.fuzz
def test_a_short_schemathesis_run_finds_no_5xx_and_no_schema_violation(live_server, settings, tmp_path):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": "1000000/min", "user": "1000000/min"},
    }
    world = seed_world()
    result = run_schemathesis(
        live_server.url,
        clinic_ref=world["clinic"],
        tokens=world["tokens"],
        max_examples=4,
        phases="fuzzing",
        workdir=tmp_path,
    )
    assert result.requests >= 200, result
    assert result.server_errors == 0 and not result.failures, result
    assert result.exit_codes == [0, 0]
