"""The web console in a real browser (Debian's Chromium, Python Playwright)
against the embedded default (the handbook embedded with the local MiniLM
model, the demo agent with its local reranker; memory store) with API keys
on: one server, one browser, shared.

A person's paths: search POL-HR-014 and see the policy first; ask the demo
agent about parental leave and watch the answer stream, then its numbered
citations linked to their chunks and the RAG inspector; start an ingestion
and watch it reach SUCCEEDED; push a file through the drop zone's file
picker; a missing or wrong key shows the status and ErrorInfo reason. Every
request the page makes goes to the groundwire server itself."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, Page, Request, expect

from groundwire.app.config import ApiKeyConfig, AuthConfig, parse_config
from groundwire.app.defaults import default_config
from groundwire.domain.auth import hash_key
from tests.support.browser import chromium, require_chromium
from tests.support.servers import RunningApp, serving

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

KEY = "gw_console_test_key_0123456789abcdef"
KEY_STORAGE = "groundwire.console.apiKey"
WAIT_MS = 60_000
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningApp]:
    base = default_config(data_dir=Path(tmp_path_factory.mktemp("console-pg")))
    cfg = base.model_copy(
        update={
            # The embedded default's index, embedder, reranker, model and agent on
            # the memory store: an embedded PostgreSQL's initdb would double the
            # module's time (tests/e2e/test_demo_default.py covers that store).
            "store": parse_config(
                {"store": {"kind": "memory"}, "auth": {"mode": "disabled"}}
            ).store,
            "auth": AuthConfig(
                mode="api_keys",
                keys=[
                    ApiKeyConfig(
                        id="console",
                        hash=hash_key(KEY),
                        permissions=["retrieve", "execute", "ingest", "manage"],
                    )
                ],
            ),
            "http": base.http.model_copy(update={"address": "127.0.0.1:0"}),
        }
    )
    async with serving(cfg) as app:
        yield app


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    executable = require_chromium()
    async with chromium(executable) as b:
        yield b


@pytest.fixture(scope="module")
def base_url(server: RunningApp) -> str:
    assert server.http_port is not None
    return f"http://127.0.0.1:{server.http_port}"


@pytest.fixture
async def context(browser: Browser, base_url: str) -> AsyncIterator[BrowserContext]:
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
    foreign: list[str] = []

    def check(request: Request) -> None:
        if not request.url.startswith(base_url + "/"):
            foreign.append(request.url)

    ctx.on("request", check)
    try:
        yield ctx
    finally:
        await ctx.close()
    assert foreign == [], f"the console reached beyond the groundwire server: {foreign}"


async def open_console(ctx: BrowserContext, base_url: str, path: str, key: str = KEY) -> Page:
    """The console at `path` with `key` kept for the tab (the "keep" checkbox's
    sessionStorage entry), so the first calls already carry it."""
    await ctx.add_init_script(f"sessionStorage.setItem({KEY_STORAGE!r}, {key!r})")
    page = await ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    await page.goto(f"{base_url}/console/{path}")
    page.set_default_timeout(WAIT_MS)
    setattr(page, "_js_errors", errors)  # noqa: B010 - read by no_js_errors
    return page


def no_js_errors(page: Page) -> None:
    assert getattr(page, "_js_errors") == []  # noqa: B009


async def test_search_shows_the_policy_first(context: BrowserContext, base_url: str) -> None:
    page = await open_console(context, base_url, "search")
    await expect(page.locator("#search-index option[value=demo]")).to_be_attached()
    await page.get_by_label("Query").fill("POL-HR-014")
    await page.get_by_label("Mode").select_option(label="hybrid")
    await page.get_by_label("Top k").fill("5")
    await page.get_by_role("button", name="Search", exact=True).click()
    first = page.locator("#search-results > li").first
    await expect(first).to_have_attribute("data-document", "policies/parental-leave.md")
    await expect(first.locator(".content")).to_contain_text("POL-HR-014")
    await expect(first.locator("[data-field=score]")).to_contain_text(
        "reciprocal rank fusion (higher is better)"
    )
    await expect(first).to_contain_text("lexical #")  # per-leg provenance
    await expect(page.locator("#search-results > li")).to_have_count(5)
    await expect(page.locator("#search-summary")).to_contain_text("HYBRID")
    await expect(page.locator("#error-banner")).to_be_hidden()
    no_js_errors(page)


async def test_agent_streams_an_answer_with_citations(
    context: BrowserContext, base_url: str
) -> None:
    page = await open_console(context, base_url, "agents")
    await expect(page.locator("#agent-select option[value=demo-assistant]")).to_be_attached()
    # Count the answer's renders: one per streamed text delta.
    await page.evaluate(
        """() => {
          window.__renders = 0;
          new MutationObserver((records) => {
            for (const r of records) {
              const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
              if (el && el.closest('[data-field=answer]')) window.__renders++;
            }
          }).observe(document.getElementById('chat-log'),
                     {childList: true, subtree: true, characterData: true});
        }"""
    )
    await page.get_by_label("Message").fill("How many weeks of parental leave do I get?")
    await page.get_by_label("Message").press("Enter")
    citations = page.locator("#chat-log ol.citations > li")
    await expect(citations.first).to_be_visible()
    answer = page.locator("#chat-log [data-field=answer]").last
    await expect(answer).to_contain_text("20 weeks")
    assert await page.evaluate("window.__renders") > 3, "the answer did not stream"
    # Numbered citation links point at the citation entries (their chunks).
    link = answer.locator("a.cite").first
    await expect(link).to_have_text("1")
    target = (await link.get_attribute("href") or "").lstrip("#")
    cited = page.locator(f"li[id='{target}']")
    await expect(cited).to_contain_text("policies/parental-leave.md")
    chunk = await cited.get_attribute("data-chunk")
    assert chunk
    # The inspector: accepted items, reranking outcome, context budget.
    inspector = page.locator("#inspector-body")
    await expect(inspector.locator("[data-field=rag-summary]")).to_contain_text("accepted")
    await expect(inspector.locator("[data-field=reranking]")).to_contain_text("succeeded")
    await expect(inspector.locator("[data-field=budget]")).to_contain_text("tokens used")
    await expect(inspector.get_by_text("Rejected (")).to_be_visible()
    accepted_row = inspector.locator(
        f"details:has(summary:text('Accepted')) tr[data-chunk='{chunk}']"
    )
    await expect(accepted_row).to_contain_text("cited")
    no_js_errors(page)


async def test_ingestion_runs_to_succeeded_and_files_push(
    context: BrowserContext, base_url: str, tmp_path: Path
) -> None:
    page = await open_console(context, base_url, "indexes")
    row = page.locator("#indexes-table tr[data-index=demo]")
    await expect(row.locator("[data-field=status]")).to_contain_text("ready")
    await row.get_by_role("button", name="Start ingestion").click()
    state = page.locator("#ingestion-progress [data-field=operation-state]")
    await expect(state).to_have_text("SUCCEEDED")
    await expect(page.locator("#operations-table tbody tr").first).to_contain_text("SUCCEEDED")
    await expect(page.locator("#operations-table tbody tr").first).to_contain_text("MANUAL")
    # Push a file the way the drop zone does (its keyboard path: the file picker).
    note = tmp_path / "console-note.md"
    note.write_text("# Console note\n\nPushed from the web console test: ZEBRA-CONSOLE-77.\n")
    await page.locator("#drop-input").set_input_files(str(note))
    await expect(page.locator("[data-field=upsert-summary]")).to_contain_text("1 upserted")
    # A real drop event: two files without a browser-given type (the media type
    # comes from the extension); the note again is unchanged, the YAML is new.
    transfer = await page.evaluate_handle(
        """() => {
          const dt = new DataTransfer();
          const note = '# Console note\\n\\nPushed from the web console test: ZEBRA-CONSOLE-77.\\n';
          dt.items.add(new File([note], 'console-note.md'));
          dt.items.add(new File(['owner: console\\nmarker: ZEBRA-CONSOLE-78\\n'], 'console.yaml'));
          return dt;
        }"""
    )
    await page.dispatch_event("#drop-zone", "drop", {"dataTransfer": transfer})
    await expect(page.locator("[data-field=upsert-summary]")).to_contain_text(
        "1 upserted, 1 unchanged"
    )
    await expect(page.locator("#error-banner")).to_be_hidden()
    no_js_errors(page)


async def test_missing_and_wrong_keys_show_a_clear_error(
    context: BrowserContext, base_url: str
) -> None:
    page = await open_console(context, base_url, "indexes", key="")
    banner = page.locator("#error-banner")
    await expect(banner).to_be_visible()
    await expect(banner.locator("#error-status")).to_have_text("UNAUTHENTICATED")
    await expect(banner.locator("#error-reason")).to_have_text("reason UNAUTHENTICATED")
    await page.get_by_role("button", name="Dismiss error").click()
    await expect(banner).to_be_hidden()
    await page.get_by_label("API key").fill("gw_not_a_real_key")
    await page.get_by_label("API key").press("Enter")
    await expect(banner).to_be_visible()
    await expect(banner.locator("#error-status")).to_have_text("UNAUTHENTICATED")
    await expect(page.locator("#indexes-table tbody tr")).to_have_count(0)
    # The right key clears the error and the page loads.
    await page.get_by_label("API key").fill(KEY)
    await page.get_by_label("API key").press("Enter")
    await expect(page.locator("#indexes-table tr[data-index=demo]")).to_be_visible()
    await expect(banner).to_be_hidden()
    no_js_errors(page)
