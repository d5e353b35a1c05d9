"""The web console in a real browser (Debian's Chromium, Python Playwright)
against the embedded default (the handbook embedded with the local MiniLM
model, the demo agent with its local reranker; memory store) with API keys
on: one server, one browser, shared.

A person's paths: search POL-HR-014 and see the policy first; ask the demo
agent about parental leave and watch the answer stream, then its numbered
citations linked to their chunks and the RAG inspector; start an ingestion
and watch it reach SUCCEEDED; push files through the drop zone (one upload a
file: a good file lands, a bad one is named with its reason) and see the push
among the operations; list, page, inspect and delete documents; a missing or
wrong key shows the status and ErrorInfo reason. Keys of each permission see
what they may use and a notice of what they may not; a key of a tenant with no
documents is told so; an answer is Markdown with no HTML through; the views
hold at 1280 and 390 px (screenshots in docs/console/). Every request the page
makes goes to the groundwire server itself."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import tempfile
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Locator, Page, Request, Route, expect

from groundwire.app.config import ApiKeyConfig, AuthConfig, parse_config
from groundwire.app.defaults import default_config
from groundwire.domain.auth import hash_key
from tests.support.browser import chromium, require_chromium
from tests.support.servers import RunningApp, serving

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

KEY = "gw_console_test_key_0123456789abcdef"
# One key a permission, and a key of a tenant that has no documents.
RETRIEVE_KEY = "gw_console_retrieve_0123456789abcdef"
INGEST_KEY = "gw_console_ingest_0123456789abcdef"
EXECUTE_KEY = "gw_console_execute_0123456789abcdef"
MANAGE_KEY = "gw_console_manage_0123456789abcdef"
ACME_KEY = "gw_console_acme_0123456789abcdef"
# The layout test's screenshots: docs/console/ when GW_CONSOLE_SCREENSHOTS names it
# (to refresh the manual's), else a temporary folder (a test run leaves the tree clean).
SCREENSHOTS = Path(
    os.environ.get("GW_CONSOLE_SCREENSHOTS")
    or Path(tempfile.gettempdir()) / "groundwire-console-screenshots"
)
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
                        # Reads the documents it pushes with this access list.
                        principals=["group:console-team"],
                    ),
                    ApiKeyConfig(
                        id="reader", hash=hash_key(RETRIEVE_KEY), permissions=["retrieve"]
                    ),
                    ApiKeyConfig(id="pusher", hash=hash_key(INGEST_KEY), permissions=["ingest"]),
                    ApiKeyConfig(id="chat", hash=hash_key(EXECUTE_KEY), permissions=["execute"]),
                    ApiKeyConfig(id="admin", hash=hash_key(MANAGE_KEY), permissions=["manage"]),
                    ApiKeyConfig(
                        id="acme",
                        hash=hash_key(ACME_KEY),
                        tenant="acme",
                        permissions=["retrieve", "ingest"],
                    ),
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
    await clean(page)


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
    await expect(page.locator("#push-results li[data-file='console-note.md']")).to_have_attribute(
        "data-outcome", "landed"
    )
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
    await expect(page.locator("#push-results li[data-file='console-note.md']")).to_have_attribute(
        "data-outcome", "unchanged"
    )
    await expect(page.locator("#push-results li[data-file='console.yaml']")).to_contain_text(
        "landed"
    )
    await clean(page)


async def test_missing_and_wrong_keys_show_a_clear_error(
    context: BrowserContext, base_url: str
) -> None:
    page = await open_console(context, base_url, "indexes", key="")
    banner = page.locator("#error-banner")
    await expect(banner).to_be_visible()
    # The key field tells the truth: this server has keys on.
    await expect(page.locator("#key-status")).to_have_text("this server needs an API key")
    assert await page.get_by_label("API key").get_attribute("placeholder") == "gw_…"
    await expect(banner.locator("#error-status")).to_have_text("UNAUTHENTICATED")
    await expect(banner.locator("#error-reason")).to_have_text("reason UNAUTHENTICATED")
    await page.get_by_role("button", name="Dismiss error").click()
    await expect(banner).to_be_hidden()
    await page.get_by_label("API key").fill("gw_not_a_real_key")
    await page.get_by_label("API key").press("Enter")
    await expect(banner).to_be_visible()
    await expect(banner.locator("#error-status")).to_have_text("UNAUTHENTICATED")
    await expect(page.locator("#key-status")).to_have_text("key refused (UNAUTHENTICATED)")
    await expect(page.locator("#indexes-table tbody tr")).to_have_count(0)
    # The right key clears the error and the page loads.
    await page.get_by_label("API key").fill(KEY)
    await page.get_by_label("API key").press("Enter")
    await expect(page.locator("#indexes-table tr[data-index=demo]")).to_be_visible()
    await expect(banner).to_be_hidden()
    await expect(page.locator("#key-status")).to_have_text(
        "key accepted · can retrieve, execute, ingest and manage"
    )
    no_js_errors(page)


async def test_key_field_says_auth_disabled_only_on_a_server_without_keys(
    browser: Browser, tmp_path: Path
) -> None:
    base = default_config(data_dir=tmp_path)
    cfg = base.model_copy(
        update={
            "store": parse_config(
                {"store": {"kind": "memory"}, "auth": {"mode": "disabled"}}
            ).store,
            "auth": AuthConfig(mode="disabled"),
            "http": base.http.model_copy(update={"address": "127.0.0.1:0"}),
        }
    )
    # Not waiting for the handbook's ingestion: listing the indexes needs none.
    async with serving(cfg, ready=False) as app:
        ctx = await browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            page = await open_console(ctx, f"http://127.0.0.1:{app.http_port}", "search", key="")
            await expect(page.locator("#key-status")).to_have_text(
                "auth disabled: this server needs no key"
            )
            assert await page.get_by_label("API key").get_attribute("placeholder") == (
                "none (auth disabled)"
            )
            await expect(page.locator("#search-index option[value=demo]")).to_be_attached()
            no_js_errors(page)
        finally:
            await ctx.close()


# -- each key sees what it may use, and a notice of what it may not ---------------


LACKS_MANAGE = (
    "This key cannot list index status or counts (it lacks manage); you can still push"
    " files into an index by name"
)
LACKS_INGEST = "This key cannot push files into an index (it lacks ingest)."


def notice(page: Page, view: str) -> Locator:
    return page.locator(f"#view-{view} [data-field=notice]")


async def go(page: Page, view: str) -> None:
    """A click on the view's tab (the client-side route, as a person moves)."""
    await page.locator(f"a[data-view={view}]").click()
    await expect(page.locator(f"#view-{view}")).to_be_visible()


async def told(page: Page, view: str, text: str) -> None:
    """Moves to `view` and sees its notice say `text` (what the key cannot do there)."""
    await go(page, view)
    await expect(notice(page, view)).to_contain_text(text)


async def open_as(context: BrowserContext, base_url: str, view: str, key: str, says: str) -> Page:
    """The console at `view` with `key`, its notice saying `says`."""
    page = await open_console(context, base_url, view, key=key)
    await expect(notice(page, view)).to_contain_text(says)
    return page


async def ask_about_leave(page: Page) -> None:
    """Asks the demo agent the handbook question and waits for the cited answer."""
    await expect(page.locator("#agent-select option[value=demo-assistant]")).to_be_attached()
    await page.get_by_label("Message").fill("How many weeks of parental leave do I get?")
    await page.get_by_label("Message").press("Enter")
    await expect(page.locator("#chat-log ol.citations > li").first).to_be_visible()


async def clean(page: Page) -> None:
    """No error banner and no JavaScript error: the notices said it all."""
    await expect(page.locator("#error-banner")).to_be_hidden()
    no_js_errors(page)


async def search_for(page: Page, text: str) -> None:
    await expect(page.locator("#search-index option[value=demo]")).to_be_attached()
    await page.get_by_label("Query").fill(text)
    await page.get_by_label("Mode").select_option(label="hybrid")
    await page.get_by_role("button", name="Search", exact=True).click()


async def test_retrieve_key_searches_and_reads_documents_only(
    context: BrowserContext, base_url: str
) -> None:
    page = await open_console(context, base_url, "indexes", key=RETRIEVE_KEY)
    await expect(page.locator("#key-status")).to_have_text(
        "key accepted · can retrieve · lacks execute, ingest and manage"
    )
    await expect(notice(page, "indexes")).to_have_text(
        "This key cannot see index status, start ingestion or push files (it lacks manage and"
        " ingest); it can list the indexes, search them and browse its tenant's documents."
    )
    row = page.locator("#indexes-table tr[data-index=demo]")
    await expect(row.get_by_role("button", name="Documents")).to_be_visible()
    await expect(row.get_by_role("button", name="Start ingestion")).to_have_count(0)
    await expect(page.locator("#index-detail")).to_be_hidden()  # no drop zone, no operations
    await go(page, "search")
    await expect(notice(page, "search")).to_be_hidden()
    await search_for(page, "POL-HR-014")
    first = page.locator("#search-results > li").first
    await expect(first).to_have_attribute("data-document", "policies/parental-leave.md")
    # The Indexes view's Documents button opens the documents of that index.
    await go(page, "indexes")
    await row.get_by_role("button", name="Documents").click()
    await expect(page).to_have_url(f"{base_url}/console/documents")
    await expect(page.locator("#documents-index")).to_have_value("demo")
    await expect(page.locator("#documents-table tr[data-document='README.md']")).to_be_visible()
    await expect(page.locator("#documents-table [data-action=inspect]").first).to_be_visible()
    await expect(page.locator("#documents-table [data-action=delete]")).to_have_count(0)
    await expect(notice(page, "documents")).to_have_text(
        "This key cannot delete documents (it lacks ingest)."
    )
    await told(page, "agents", "This key cannot list agents or chat with them (it lacks execute).")
    await expect(page.locator("#chat-send")).to_be_disabled()
    await clean(page)


async def test_ingest_key_pushes_each_file_with_its_own_result(
    context: BrowserContext, base_url: str
) -> None:
    page = await open_as(context, base_url, "indexes", INGEST_KEY, LACKS_MANAGE)
    row = page.locator("#indexes-table tr[data-index=demo]")
    await expect(row.locator("[data-field=documents]")).to_have_text("–")
    await expect(row.get_by_role("button", name="Documents")).to_have_count(0)
    await expect(page.locator("#drop-zone")).to_be_visible()
    # One drop: a good file, a 6 MB file no loader reads (over the 4 MiB message
    # bound a Connect push had) and one over the index's 10 MiB max_file_bytes.
    transfer = await page.evaluate_handle(
        """() => {
          const dt = new DataTransfer();
          dt.items.add(new File(['# Pushed\\n\\nZEBRA-PUSH-91 landed from the console.\\n'],
                                'pushed-by-ingest.md'));
          dt.items.add(new File([new Uint8Array(6 * 1024 * 1024)], 'zeros.bin'));
          dt.items.add(new File([new Uint8Array(11 * 1024 * 1024)], 'huge.txt'));
          return dt;
        }"""
    )
    await page.dispatch_event("#drop-zone", "drop", {"dataTransfer": transfer})
    await expect(page.locator("[data-field=upsert-summary]")).to_contain_text(
        "1 upserted, 0 unchanged, 2 failed"
    )
    results = page.locator("#push-results")
    good = results.locator("li[data-file='pushed-by-ingest.md']")
    await expect(good).to_have_attribute("data-outcome", "landed")
    await expect(good).to_contain_text("landed: 1 chunk")
    zeros = results.locator("li[data-file='zeros.bin']")
    await expect(zeros).to_have_attribute("data-outcome", "failed")
    await expect(zeros).to_contain_text("failed: UNSUPPORTED_FORMAT")
    # Its upload ran to the end (the progress bar is full).
    assert await zeros.locator("progress").evaluate("p => p.value === p.max && p.max > 6e6")
    huge = results.locator("li[data-file='huge.txt']")
    await expect(huge).to_contain_text("failed: FILE_TOO_LARGE")
    # The push is among the operations this key started.
    ops = page.locator("#operations-table tbody tr").first
    await expect(ops).to_contain_text("PUSH")
    await told(page, "search", "This key cannot search (it lacks retrieve).")
    await told(page, "documents", "This key cannot list or inspect documents (it lacks retrieve).")
    await clean(page)


async def test_execute_key_chats(context: BrowserContext, base_url: str) -> None:
    page = await open_console(context, base_url, "agents", key=EXECUTE_KEY)
    await expect(page.locator("#key-status")).to_contain_text("can execute")
    await expect(notice(page, "agents")).to_be_hidden()
    await ask_about_leave(page)
    await expect(page.locator("#chat-log [data-field=answer]").last).to_contain_text("20 weeks")
    await told(page, "indexes", "(it lacks manage and ingest)")
    await told(page, "search", "This key cannot search (it lacks retrieve).")
    await clean(page)


async def test_manage_key_runs_ingestion_but_cannot_push(
    context: BrowserContext, base_url: str
) -> None:
    page = await open_as(context, base_url, "indexes", MANAGE_KEY, LACKS_INGEST)
    row = page.locator("#indexes-table tr[data-index=demo]")
    await expect(row.locator("[data-field=status]")).to_contain_text("ready")
    await expect(page.locator("#index-detail")).to_be_visible()
    await expect(page.locator("#drop-zone")).to_be_hidden()
    await row.get_by_role("button", name="Start ingestion").click()
    state = page.locator("#ingestion-progress [data-field=operation-state]")
    await expect(state).to_have_text("SUCCEEDED")
    await expect(page.locator("#operations-table tbody tr").first).to_contain_text("MANUAL")
    await told(page, "agents", "(it lacks execute)")
    await clean(page)


async def test_a_tenant_without_documents_is_told_so(
    context: BrowserContext, base_url: str
) -> None:
    empty = "Your key's tenant has no documents in this index."
    page = await open_as(context, base_url, "search", ACME_KEY, empty)
    await search_for(page, "parental leave")
    await expect(page.locator("#search-summary")).to_have_text(
        "No results (your key's tenant has no documents in this index)."
    )
    await expect(page.locator("#search-results > li")).to_have_count(0)
    await go(page, "documents")
    await expect(notice(page, "documents")).to_have_text(empty)
    await expect(page.locator("#documents-table tbody tr")).to_have_count(0)
    no_js_errors(page)


# -- documents: list, page, inspect, delete ----------------------------------------


def upload(base_url: str, key: str, name: str, body: bytes, acl: str = "") -> dict[str, Any]:
    """One file through the binary upload route, as the console sends it."""
    req = urllib.request.Request(
        f"{base_url}/api/rag/indexes/demo/files?name={name}" + (f"&acl={acl}" if acl else ""),
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "text/markdown"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        result: dict[str, Any] = json.load(resp)
    return result


async def test_documents_list_page_inspect_and_delete(
    context: BrowserContext, base_url: str
) -> None:
    doc = "zz-console-delete-me.md"
    pushed = await asyncio.to_thread(
        upload,
        base_url,
        KEY,
        doc,
        b"# Delete me\n\nZEBRA-DELETE-55 is here.\n\n## Part two\n\nMore.\n",
        acl="group:console-team",
    )
    assert pushed["upserted"] == 1, pushed
    page = await open_console(context, base_url, "documents")
    await page.get_by_label("Per page").select_option("10")
    rows = page.locator("#documents-table tbody tr")
    await expect(rows).to_have_count(10)
    await expect(rows.first).to_have_attribute("data-document", "README.md")
    await expect(page.get_by_role("button", name="Previous page")).to_be_disabled()
    await page.get_by_role("button", name="Next page").click()
    await expect(page.locator("[data-field=page]")).to_contain_text("Documents 11–")
    await expect(rows.first).not_to_have_attribute("data-document", "README.md")
    # Ordered by id: the pushed document is on the last page.
    while await page.get_by_role("button", name="Next page").is_enabled():
        await page.get_by_role("button", name="Next page").click()
    await expect(page.locator("[data-field=page]")).to_contain_text("(last page)")
    row = page.locator(f"#documents-table tr[data-document='{doc}']")
    await expect(row).to_contain_text(f"push:{doc}")
    await page.get_by_role("button", name="Previous page").click()
    await expect(row).to_have_count(0)
    await page.get_by_role("button", name="Next page").click()
    await row.get_by_role("button", name="Inspect").click()
    detail = page.locator("#document-detail")
    await expect(detail.locator("#h-document")).to_contain_text(doc)
    await expect(detail.locator("[data-field=document-info]")).to_contain_text(f"push:{doc}")
    await expect(detail.locator("[data-field=acl]")).to_have_text("group:console-team")
    chunks = detail.locator("ol.chunks > li")
    await expect(chunks.first).to_contain_text("ZEBRA-DELETE-55")
    await expect(chunks.first).to_contain_text("characters 0–")
    # Delete asks first; "Keep" keeps it.
    await row.get_by_role("button", name="Delete…").click()
    await expect(page.locator("[data-field=confirm]")).to_contain_text(f"Delete {doc} from demo?")
    await page.get_by_role("button", name="Keep").click()
    await expect(page.locator("[data-field=confirm]")).to_have_count(0)
    await expect(row).to_be_visible()
    await row.get_by_role("button", name="Delete…").click()
    await page.get_by_role("button", name="Delete", exact=True).click()
    await expect(page.locator("#documents-status")).to_contain_text(f"Deleted 1 document ({doc})")
    await expect(row).to_have_count(0)
    await expect(detail).to_be_hidden()
    await clean(page)


# -- answers are Markdown, and no HTML gets through --------------------------------


def connect_stream(*messages: dict[str, Any]) -> bytes:
    """A Connect server-streaming body (JSON): each message enveloped, then the end."""
    out = b""
    for flags, msg in [*((0, m) for m in messages), (2, {})]:
        data = json.dumps(msg).encode()
        out += struct.pack(">BI", flags, len(data)) + data
    return out


HOSTILE_ANSWER = (
    "## Leave\n\nYou get **20 weeks** of paid leave [1].\n\n"
    "- first point [2]\n- `code [1]` stays code\n\n"
    '<img src=x onerror="window.__pwned = 1"> <script>window.__pwned = 2</script>\n\n'
    '<div onclick="window.__pwned = 3">raw block</div>\n\n'
    "[click](javascript:window.__pwned=4) ![pic](http://example.invalid/x.png)\n"
)


async def test_answer_renders_markdown_without_html(context: BrowserContext, base_url: str) -> None:
    page = await open_console(context, base_url, "agents")
    citation = {"documentId": "policies/parental-leave.md", "title": "Parental Leave Policy"}
    body = connect_stream(
        {"type": "EXECUTION_EVENT_TYPE_TEXT_DELTA", "textDelta": HOSTILE_ANSWER[:60]},
        {"type": "EXECUTION_EVENT_TYPE_TEXT_DELTA", "textDelta": HOSTILE_ANSWER[60:]},
        {
            "type": "EXECUTION_EVENT_TYPE_EXECUTION_COMPLETED",
            "result": {
                "answer": HOSTILE_ANSWER,
                "model": "stub",
                "citations": [
                    {**citation, "sourceNumber": 1, "displayNumber": 1, "chunkId": "c-one"},
                    {**citation, "sourceNumber": 2, "displayNumber": 2, "chunkId": "c-two"},
                ],
            },
        },
    )

    async def stream(route: Route) -> None:
        await route.fulfill(
            status=200, headers={"content-type": "application/connect+json"}, body=body
        )

    await page.route("**/groundwire.v1.AgentService/ExecuteStream", stream)
    await expect(page.locator("#agent-select option[value=demo-assistant]")).to_be_attached()
    await page.get_by_label("Message").fill("leave?")
    await page.get_by_label("Message").press("Enter")
    answer = page.locator("#chat-log [data-field=answer]").last
    await expect(answer.locator("a.cite")).to_have_count(2)
    await expect(answer.locator("h2")).to_have_text("Leave")
    await expect(answer.locator("strong")).to_have_text("20 weeks")
    await expect(answer.locator("li code")).to_have_text("code [1]")  # no link inside code
    # The raw HTML is shown as text; no element of it exists and nothing ran.
    await expect(answer).to_contain_text("<script>window.__pwned = 2</script>")
    hostile = "img, script, div[onclick], [onerror], a[href^='javascript']"
    assert await answer.locator(hostile).count() == 0
    assert await page.evaluate("window.__pwned") is None
    link = answer.locator("a.cite").first
    await link.click()
    target = (await link.get_attribute("href") or "").lstrip("#")
    await expect(page.locator(f"li[id='{target}']")).to_have_attribute("data-chunk", "c-one")
    no_js_errors(page)


# -- layouts at 1280 and 390 px ----------------------------------------------------


async def no_horizontal_overflow(page: Page) -> None:
    """Waits until the page is no wider than the viewport (nothing scrolls sideways)."""
    await page.wait_for_function(
        "() => document.documentElement.scrollWidth <= innerWidth", timeout=WAIT_MS
    )


SINGLE_LINE = """(cells) => cells.every((td) => {
  const r = document.createRange(); r.selectNodeContents(td);
  const tops = new Set([...r.getClientRects()].map((x) => Math.round(x.top)));
  return tops.size === 1;
})"""


async def test_layouts_at_1280_and_390(context: BrowserContext, base_url: str) -> None:
    page = await open_console(context, base_url, "agents")
    await ask_about_leave(page)
    scores = page.locator("#inspector-body td.score")
    for width in (1280, 390):
        await page.set_viewport_size({"width": width, "height": 900 if width > 600 else 844})
        await page.locator("#inspector-body details").evaluate_all(
            "ds => ds.forEach((d) => { d.open = true; })"
        )
        await expect(scores.first).to_be_visible()
        assert await scores.evaluate_all(SINGLE_LINE), f"a score wraps at {width} px"
        await no_horizontal_overflow(page)
        await page.screenshot(path=SCREENSHOTS / f"agents-{width}.png", full_page=True)
    await page.set_viewport_size({"width": 1280, "height": 900})
    for width in (1280, 390):
        await page.set_viewport_size({"width": width, "height": 900 if width > 600 else 844})
        await go(page, "indexes")
        await expect(page.locator("#operations-table tbody tr").first).to_be_visible()
        await no_horizontal_overflow(page)
        await page.screenshot(path=SCREENSHOTS / f"indexes-{width}.png")
        await go(page, "search")
        await search_for(page, "POL-HR-014")
        await expect(page.locator("#search-results > li").first).to_be_visible()
        await page.locator("#search-summary").scroll_into_view_if_needed()
        await no_horizontal_overflow(page)
        await page.screenshot(path=SCREENSHOTS / f"search-{width}.png")
        await go(page, "documents")
        await expect(page.locator("#documents-table tbody tr").first).to_be_visible()
        await no_horizontal_overflow(page)
        await page.screenshot(path=SCREENSHOTS / f"documents-{width}.png")
        await page.locator("#documents-table [data-action=inspect]").first.click()
        await expect(page.locator("#document-detail ol.chunks > li").first).to_be_visible()
        await no_horizontal_overflow(page)
    no_js_errors(page)
