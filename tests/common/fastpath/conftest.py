"""These tests are about the fast paths themselves: they run with them on whatever ``FASTPATHS`` says
(the switch-off run proves everything else passes without them; ``test_switch.py`` checks the off roads)."""

import pytest


@pytest.fixture(autouse=True)
def _fastpaths_on(settings):
    settings.FASTPATHS = True
