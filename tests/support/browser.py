"""Debian's Chromium driven by Python Playwright, for the web console's
end-to-end tests and screenshots (scripts/console_screenshots.py).

Playwright never downloads a browser here (no `playwright install`): it
launches /usr/bin/chromium, headless, without the sandbox (root) and without
Chromium's background networking, which this machine's closed network refuses.
When Chromium is missing and the suite runs as root, tests/conftest.py starts
`apt-get install chromium` in the background at session start
(tests/support/background_builds.py) and `require_chromium` waits for it (on its
lock, from any xdist worker); a
missing browser then fails the tests in CI and skips them elsewhere."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

from tests.support import background_builds
from tests.support.toolchains import in_ci

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


def require_chromium(timeout: float = 600) -> Path:
    """/usr/bin/chromium, waiting for a background install if one runs."""
    log = background_builds.wait_for("chromium", timeout=timeout)
    if not CHROMIUM.exists() and not log:
        # Another process of the session may be installing it: wait on its lock.
        log = background_builds.install_chromium(timeout)
    if CHROMIUM.exists():
        return CHROMIUM
    reason = f"the web console's browser tests need Debian's chromium at {CHROMIUM}"
    if log:
        reason += f"; apt-get failed:\n{log[-2000:]}"
    if in_ci():
        pytest.fail(f"{reason}; CI=true, so a missing browser is a failure", pytrace=False)
    pytest.skip(reason)


@contextlib.asynccontextmanager
async def chromium(executable: Path = CHROMIUM) -> AsyncIterator[Browser]:
    """One headless Chromium for the block."""
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(executable), headless=True, args=LAUNCH_ARGS
        )
        try:
            yield browser
        finally:
            await browser.close()
