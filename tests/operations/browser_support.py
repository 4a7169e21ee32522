"""Browser-test support: Debian's Chromium driven by the Playwright Python package.

Never ``playwright install``: the browser is the system's ``/usr/bin/chromium``. If it is missing,
the session fixture installs it with apt-get and skips only when that fails. Screenshots go to
``test-artifacts/screenshots/`` (git-ignored). Run just these with ``pytest -m browser``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "pw-for-tests-1"
LAPTOP = {"width": 1366, "height": 800}
TABLET = {"width": 768, "height": 1024}


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    if not CHROMIUM.exists():
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        try:
            subprocess.run(["apt-get", "update"], check=True, capture_output=True, timeout=300, env=env)
            subprocess.run(
                ["apt-get", "install", "-y", "chromium"],
                check=True,
                capture_output=True,
                timeout=600,
                env=env,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.skip(f"Chromium is not installed and apt-get could not install it: {exc}")
        if not CHROMIUM.exists():
            pytest.skip("apt-get ran but /usr/bin/chromium is still missing")
    return str(CHROMIUM)


@pytest.fixture(scope="session")
def browser(chromium_executable):
    # Playwright's sync API keeps an asyncio loop on this thread; the test body still uses the ORM
    # synchronously (factories), which Django would otherwise refuse.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        # Generous waits: assertions retry until true, so a loaded CI machine only makes them slower.
        sync_api.expect.set_options(timeout=20_000)
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium_executable, headless=True, args=CHROMIUM_ARGS
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


#: Counts the page's htmx requests in flight (``settle``), injected before any script of the page runs.
_HTMX_IN_FLIGHT = """
(() => {
  let inFlight = 0;
  window.__htmxInFlight = () => inFlight;
  document.addEventListener("htmx:beforeRequest", () => { inFlight += 1; }, true);
  document.addEventListener("htmx:afterRequest", () => { inFlight = Math.max(0, inFlight - 1); }, true);
})();
"""


def settle(page) -> None:
    """Wait until the page has loaded and no htmx request is in flight, swapping or settling (the parts a page
    loads after itself included: their requests start while the page is processed). Playwright's "networkidle"
    waited for this too, plus half a second of quiet after every load."""
    page.wait_for_load_state("load")
    page.wait_for_function(
        "() => window.__htmxInFlight !== undefined && window.__htmxInFlight() === 0"
        " && !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
    )


@pytest.fixture
def open_page(browser, live_server):
    """``open_page(viewport)`` → a fresh browser context and page on the live server.

    Script errors and console errors other than the expected HTTP status of a page (a CSP
    violation is one) are collected on ``page.errors``.
    """
    contexts = []

    def make(viewport=LAPTOP):
        context = browser.new_context(base_url=live_server.url, viewport=viewport)
        context.set_default_timeout(20_000)
        context.add_init_script(_HTMX_IN_FLIGHT)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("console", lambda msg: _console_error(page, msg))
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        return page

    yield make
    for context in contexts:
        context.close()


def _console_error(page, msg) -> None:
    # A 404 page is answered with status 404 on purpose; Chromium logs that as "Failed to load resource".
    if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
        page.errors.append(msg.text)


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def sign_in(page, username: str) -> None:
    page.goto("/console/")
    page.wait_for_url(re.compile(r"/console/login/"))
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(re.compile(r"/console/c/[^/]+/$"))
