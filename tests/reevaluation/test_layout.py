"""Reevaluation's rooms (issue 42): features are packages, nothing is spread by file suffix, and the modules the
front re-exports commands from are the command modules the status guardrail allows to write."""

from __future__ import annotations

import pathlib

from tests.test_guardrails import FRONT_COMMANDS

APP = pathlib.Path(__file__).resolve().parents[2] / "reevaluation"
FEATURES = {"intake", "jobs", "rounds", "modes", "redrive", "proposals"}


def test_each_feature_is_a_package_and_no_module_is_named_by_suffix():
    packages = {p.parent.name for p in APP.glob("*/__init__.py")}
    assert FEATURES <= packages
    assert not list((APP / "services").glob("*.py")), "reevaluation/services.py is the front; commands live in features"
    top = sorted(p.name for p in APP.glob("*.py"))
    spread = [name for name in top if name.startswith(("selectors_", "page_")) or name.endswith("_urls.py")]
    assert spread == [], spread


def test_the_fronts_commands_are_command_modules():
    """Modules not named ``services.py`` that write: found through the front (``tests/test_guardrails.py``)."""
    for rel in ("reevaluation/jobs/worker.py", "reevaluation/jobs/claim.py", "reevaluation/jobs/leases.py",
                "reevaluation/intake/heads.py"):
        assert rel in FRONT_COMMANDS, rel
    assert "reevaluation/proposals/pages.py" not in FRONT_COMMANDS
    assert "reevaluation/modes/readout.py" not in FRONT_COMMANDS
