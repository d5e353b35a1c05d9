#!/usr/bin/env python3
"""Screenshots of the web console's three views for the README (docs/console/).

Starts the embedded default in this process (the handbook, the local MiniLM
model, the demo agent; memory store, HTTP port on 127.0.0.1:0), drives Debian's
Chromium with Playwright exactly as tests/e2e/test_console.py does, and writes
indexes.png, search.png and agents.png.

    python scripts/console_screenshots.py [--out docs/console]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "server"), str(ROOT / "clients" / "python" / "src")]

from playwright.async_api import ViewportSize  # noqa: E402

from groundwire.app.config import parse_config  # noqa: E402
from groundwire.app.defaults import default_config  # noqa: E402
from tests.support.browser import CHROMIUM, chromium  # noqa: E402
from tests.support.servers import serving  # noqa: E402

VIEWPORT: ViewportSize = {"width": 1280, "height": 1000}
WAIT_MS = 120_000


async def take(out: Path) -> None:
    logging.getLogger("groundwire").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="gw-console-shots-") as tmp:
        base = default_config(data_dir=Path(tmp) / "pgdata")
        cfg = base.model_copy(
            update={
                "store": parse_config(
                    {"store": {"kind": "memory"}, "auth": {"mode": "disabled"}}
                ).store,
                "http": base.http.model_copy(update={"address": "127.0.0.1:0"}),
            }
        )
        async with serving(cfg) as app, chromium(CHROMIUM) as browser:
            url = f"http://127.0.0.1:{app.http_port}/console"
            page = await browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(WAIT_MS)

            await page.goto(f"{url}/indexes")
            await page.locator(
                "#indexes-table tr[data-index=demo] button[data-action=start]"
            ).click()
            await page.wait_for_selector(
                "#ingestion-progress [data-field=operation-state]:text('SUCCEEDED')"
            )
            await page.screenshot(path=str(out / "indexes.png"))

            await page.goto(f"{url}/search")
            await page.wait_for_selector("#search-index option[value=demo]", state="attached")
            await page.fill("#search-query", "POL-HR-014")
            await page.select_option("#search-mode", label="hybrid")
            await page.fill("#search-topk", "5")
            await page.click("#search-form button[type=submit]")
            await page.wait_for_selector("#search-results > li")
            await page.screenshot(path=str(out / "search.png"))

            await page.goto(f"{url}/agents")
            await page.wait_for_selector("#agent-select option", state="attached")
            await page.fill("#chat-input", "How many weeks of parental leave do I get?")
            await page.press("#chat-input", "Enter")
            await page.wait_for_selector("#chat-log ol.citations > li")
            await page.screenshot(path=str(out / "agents.png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        sys.exit(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(take(args.out))
    for name in ("indexes", "search", "agents"):
        print(args.out / f"{name}.png")


if __name__ == "__main__":
    main()
