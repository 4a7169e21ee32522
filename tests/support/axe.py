"""axe-core (axe-playwright-python) in the browser tests: the violations that fail a page."""

from __future__ import annotations

BLOCKING = ("critical", "serious")


def blocking_violations(page) -> list[str]:
    """The page's critical and serious violations, each with up to three of its targets."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    found = []
    for violation in results.response["violations"]:
        if violation.get("impact") in BLOCKING:
            targets = [" ".join(map(str, node["target"])) for node in violation["nodes"][:3]]
            found.append(f"{violation['impact']} {violation['id']}: {violation['help']} @ {targets}")
    return found
