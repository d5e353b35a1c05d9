"""The web console signed in with a real identity provider (Debian's Chromium,
Python Playwright, Keycloak 26 from tests/support/keycloak.py).

Sign-in with the provider: the console offers "Sign in with keycloak" (the
issuer's `console_client_id`, a public client), sends the person to Keycloak's
own login page with a PKCE S256 challenge, and back in the console exchanges the
code with its verifier (no client secret) for an access token: the person is
signed in on the view they started from, the code gone from the address bar,
and reads exactly their documents.

The server accepts tokens only (`[auth] mode = "tokens"`, one Keycloak realm as
its issuer). A person pastes the access token Keycloak issued them into the
console's key field: the console says the credential is accepted, and search
shows exactly what that person may read (their group's document and the one
without an access list, never another group's); a tampered token is refused
with its stable reason, shown in the console's error banner, and a garbage token
too. Every request the page makes goes to the groundwire server itself."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import jwt
import pytest
from playwright.async_api import Browser, BrowserContext, Page, Request, expect

from groundwire.app.config import parse_config
from tests.support.browser import chromium, require_chromium
from tests.support.jwt_forge import tamper, unsigned
from tests.support.keycloak import PASSWORD, Keycloak, Realm, User
from tests.support.servers import RunningApp, serving

pytestmark = [pytest.mark.timeout(1800), pytest.mark.slow]

RUN = uuid.uuid4().hex[:8]
MARK = {
    kind: f"zq{kind}{''.join('ghijklmnop'[int(c)] if c.isdigit() else c for c in RUN)}mark"
    for kind in ("public", "hr", "board")
}
WAIT_MS = 60_000
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def realm(keycloak: Keycloak) -> Realm:
    return keycloak.realm(f"console{RUN}", [User("alice", ["hr"])])


@pytest.fixture(scope="module")
async def server(realm: Realm) -> AsyncIterator[RunningApp]:
    acls = {"public": [], "hr": ["group:hr"], "board": ["group:board"]}
    cfg = parse_config(
        {
            "store": {"kind": "memory"},
            "auth": {
                "mode": "tokens",
                "issuers": [
                    {
                        "id": "keycloak",
                        "issuer": realm.issuer,
                        "audiences": [realm.audience],
                        "tenant": "acme",
                        "allow_http": True,
                        "allow_cidrs": ["127.0.0.1/32"],
                        "console_client_id": realm.console_client_id,
                    }
                ],
            },
            "http": {"address": "127.0.0.1:0", "console": True},
            "indexes": {
                "handbook": {
                    "tenant": "acme",
                    "sources": [
                        {
                            "kind": "inline",
                            "id": f"{kind}-doc",
                            "title": f"The {kind} page",
                            "text": f"{MARK[kind]} common leave policy words.",
                            "acl": acl,
                        }
                        for kind, acl in acls.items()
                    ],
                    "ingestion": {"strategy": "on_startup"},
                }
            },
        }
    )
    async with serving(cfg) as app:
        realm.allow_console(f"http://127.0.0.1:{app.http_port}/console/")
        yield app


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    executable = require_chromium()
    async with chromium(executable) as b:
        yield b


@pytest.fixture
async def context(browser: Browser, server: RunningApp) -> AsyncIterator[BrowserContext]:
    base = f"http://127.0.0.1:{server.http_port}"
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900}, base_url=base)
    foreign: list[str] = []

    def check(request: Request) -> None:
        if not request.url.startswith(base + "/"):
            foreign.append(request.url)

    ctx.on("request", check)
    try:
        yield ctx
    finally:
        await ctx.close()
    assert foreign == [], f"the console reached beyond the groundwire server: {foreign}"


async def sign_in(ctx: BrowserContext, token: str) -> Page:
    page = await ctx.new_page()
    page.set_default_timeout(WAIT_MS)
    await page.goto("/console/search")
    await expect(page.locator("#key-status")).to_have_text("this server needs an API key")
    field = page.get_by_label("API key or token")
    await field.fill(token)
    await field.press("Enter")
    return page


async def search(page: Page, text: str) -> None:
    await page.get_by_label("Query").fill(text)
    await page.get_by_label("Mode").select_option(label="lexical")
    await page.get_by_role("button", name="Search", exact=True).click()


async def test_a_pasted_token_reads_as_its_person(context: BrowserContext, realm: Realm) -> None:
    page = await sign_in(context, realm.password_token("alice"))
    await expect(page.locator("#key-status")).to_contain_text("key accepted")
    await expect(page.locator("#search-index option[value=handbook]")).to_be_attached()
    await search(page, "common leave policy words")
    results = page.locator("#search-results > li")
    await expect(results).to_have_count(2)
    docs = {await results.nth(i).get_attribute("data-document") for i in range(2)}
    assert docs == {"public-doc", "hr-doc"}
    await search(page, MARK["board"])
    await expect(page.locator("#search-results > li")).to_have_count(0)
    content = await page.content()
    assert MARK["board"] not in content.replace(f'value="{MARK["board"]}"', "")


async def test_a_tampered_token_is_refused_with_its_reason(
    context: BrowserContext, realm: Realm
) -> None:
    forged = tamper(realm.password_token("alice"))
    page = await sign_in(context, forged)
    await expect(page.locator("#key-status")).to_contain_text(
        "key refused (TOKEN_SIGNATURE_INVALID)"
    )
    status = await page.locator("#key-status").text_content() or ""
    assert forged.split(".")[1] not in status
    # Alice's real claims, unsigned (`alg: none`).
    real = realm.password_token("alice")
    claims = jwt.decode(real, options={"verify_signature": False})
    page = await sign_in(context, unsigned(claims, jwt.get_unverified_header(real)["kid"]))
    await expect(page.locator("#key-status")).to_contain_text(
        "key refused (TOKEN_ALGORITHM_REFUSED)"
    )


async def test_sign_in_with_keycloak_authorization_code_and_pkce(
    browser: Browser, server: RunningApp, realm: Realm
) -> None:
    base = f"http://127.0.0.1:{server.http_port}"
    ctx = await browser.new_context(viewport={"width": 1280, "height": 900}, base_url=base)
    foreign: list[str] = []
    token_requests: list[str] = []

    def check(request: Request) -> None:
        if request.url.startswith(realm.token_url):
            token_requests.append(request.post_data or "")
        # The provider's own pages load their styles and scripts from its origin.
        if not request.url.startswith((base + "/", realm.keycloak.url + "/")):
            foreign.append(request.url)

    ctx.on("request", check)
    try:
        page = await ctx.new_page()
        page.set_default_timeout(WAIT_MS)
        await page.goto("/console/search")
        button = page.get_by_role("button", name="Sign in with keycloak")
        await button.click()
        # Keycloak's own sign-in page.
        await page.locator("#username").fill("alice")
        await page.locator("#password").fill(PASSWORD)
        await page.locator("#kc-login").click()
        # Back in the console, signed in: the code left the address bar.
        await expect(page.locator("#key-status")).to_contain_text("key accepted")
        assert page.url == f"{base}/console/search"
        await search(page, "common leave policy words")
        results = page.locator("#search-results > li")
        await expect(results).to_have_count(2)
        docs = {await results.nth(i).get_attribute("data-document") for i in range(2)}
        assert docs == {"public-doc", "hr-doc"}
        # PKCE: the code was exchanged with a verifier, by the public client.
        assert len(token_requests) == 1
        assert "code_verifier=" in token_requests[0]
        assert "client_secret" not in token_requests[0]
    finally:
        await ctx.close()
    assert foreign == [], f"the console reached beyond groundwire and the provider: {foreign}"
