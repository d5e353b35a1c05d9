"""The console follows a push while the server embeds it: the upload route names
the push's operation as soon as it begins (its streamed answer), the console
watches it (WatchIngestion) and shows its phase and chunks embedded on the
file's row, then the file's outcome. The embedder is held at a gate, so the
running state is seen whatever the machine's speed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import BrowserContext, expect

from tests.e2e.test_console import (  # noqa: F401 (the module's fixtures)
    INGEST_KEY,
    LACKS_MANAGE,
    base_url,
    browser,
    context,
    no_js_errors,
    open_as,
    server,
)
from tests.support.embedders import ControlledEmbedder
from tests.support.servers import RunningApp


async def test_a_push_is_followed_while_the_server_embeds_it(
    context: BrowserContext,  # noqa: F811
    base_url: str,  # noqa: F811
    server: RunningApp,  # noqa: F811
    tmp_path: Path,
) -> None:
    handle = server.components.catalog.get("demo")
    real = handle.embedder
    assert real is not None
    gate = ControlledEmbedder(real.info.dimensions, gated=True)
    handle.embedder = gate
    try:
        page = await open_as(context, base_url, "indexes", INGEST_KEY, LACKS_MANAGE)
        note = tmp_path / "followed.md"
        note.write_text("# Followed\n\nZEBRA-FOLLOWED-12 embedded behind a gate.\n")
        await page.locator("#drop-input").set_input_files(str(note))
        row = page.locator("#push-results li[data-file='followed.md']")
        # Held in the embedder (waited for: the row may show the phase while the push is
        # still being parsed and chunked, before its first batch reaches the embedder):
        # the row shows the running push's phase.
        # (one event loop for the suite's fixtures and tests: the server's is this one)
        await asyncio.wait_for(gate.entered.wait(), timeout=60)
        await expect(row.locator("[data-field=push-state]")).to_have_text(
            "ingesting: 0 chunks embedded"
        )
        gate.release.set()
        await expect(row).to_have_attribute("data-outcome", "landed")
        await expect(row).to_contain_text("landed: 1 chunk")
        no_js_errors(page)
    finally:
        handle.embedder = real
        gate.release.set()
