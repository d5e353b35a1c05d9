"""The URL source's fetcher against a real HTTP server on 127.0.0.1: success,
conditional requests, redirects, and every refusal of the URL policy one by one
(the refusal matrix in the README is this file). Host names are resolved by an
injected resolver so that "a name that resolves to a private address" needs no DNS."""

from __future__ import annotations

import ipaddress
import ssl
import time
from collections.abc import Iterator

import pytest

from groundwire.ingestion.url_fetch import (
    Fetched,
    FetchError,
    FetchFailure,
    FetchSettings,
    NotModified,
    Validators,
    fetch_url,
)
from groundwire.ingestion.url_policy import (
    AllowList,
    IPAddress,
    UrlRefusal,
    UrlRefused,
    address_refusal,
    check_url,
)
from tests.support.tls import Pki, make_pki
from tests.support.web_standin import Page, WebStandIn

pytestmark = pytest.mark.timeout(30)

LOOPBACK = AllowList.of(cidrs=["127.0.0.1/32"])
HTML = frozenset({"text/html", "text/plain"})


def settings(allow: AllowList = LOOPBACK, **kw: object) -> FetchSettings:
    base: dict[str, object] = {
        "allow": allow,
        "media_types": HTML,
        "max_bytes": 64 * 1024,
        "max_redirects": 3,
        "connect_timeout": 2.0,
        "read_timeout": 2.0,
        "total_timeout": 10.0,
    }
    base.update(kw)
    return FetchSettings(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def web() -> Iterator[WebStandIn]:
    with WebStandIn() as server:
        yield server


def resolver_to(mapping: dict[str, str]) -> object:
    async def resolve(host: str, port: int) -> list[IPAddress]:
        if host in mapping:
            return [ipaddress.ip_address(mapping[host])]
        return [ipaddress.ip_address(host)]

    return resolve


async def refusal_of(url: str, s: FetchSettings | None = None, **kw: object) -> FetchError:
    with pytest.raises(FetchError) as info:
        await fetch_url(url, s or settings(), **kw)  # type: ignore[arg-type]
    err = info.value
    # Never the path, query or credentials: at most scheme://host[:port].
    assert "?" not in str(err) and "secret" not in str(err) and "secret" not in err.origin
    return err


# --- success, validators, redirects -------------------------------------------------


async def test_fetches_a_page_with_its_validators(web: WebStandIn) -> None:
    web.pages["/ok"] = Page(
        b"<p>hello</p>", etag='"v1"', last_modified="Tue, 01 Dec 2026 09:00:00 GMT"
    )
    got = await fetch_url(web.url("/ok"), settings())
    assert isinstance(got, Fetched)
    assert got.body == b"<p>hello</p>"
    assert (got.media_type, got.charset) == ("text/html", "utf-8")
    assert got.validators == Validators('"v1"', "Tue, 01 Dec 2026 09:00:00 GMT")
    headers = web.hits("/ok")[-1]
    assert headers["accept-encoding"] == "identity"
    assert "if-none-match" not in headers


async def test_a_conditional_request_answered_304_is_not_modified(web: WebStandIn) -> None:
    web.pages["/cond"] = Page(b"<p>same</p>", etag='"e1"')
    got = await fetch_url(web.url("/cond"), settings(), conditional=Validators('"e1"', ""))
    assert isinstance(got, NotModified)
    assert web.hits("/cond")[-1]["if-none-match"] == '"e1"'
    # A stale validator gets the page again.
    got = await fetch_url(web.url("/cond"), settings(), conditional=Validators('"old"', ""))
    assert isinstance(got, Fetched) and got.body == b"<p>same</p>"


async def test_if_modified_since_is_sent_from_last_modified(web: WebStandIn) -> None:
    lm = "Mon, 30 Nov 2026 10:00:00 GMT"
    web.pages["/lm"] = Page(b"x", "text/plain", last_modified=lm)
    got = await fetch_url(web.url("/lm"), settings(), conditional=Validators("", lm))
    assert isinstance(got, NotModified)
    assert web.hits("/lm")[-1]["if-modified-since"] == lm


async def test_follows_redirects_and_checks_each_target(web: WebStandIn) -> None:
    web.pages["/r1"] = Page(status=302, location="/r2")
    web.pages["/r2"] = Page(status=301, location=web.url("/final"))
    web.pages["/final"] = Page(b"landed", "text/plain")
    got = await fetch_url(web.url("/r1"), settings())
    assert isinstance(got, Fetched) and got.body == b"landed" and got.redirects == 2


async def test_connects_to_the_checked_address_and_keeps_the_host_name(web: WebStandIn) -> None:
    # "docs.example" resolves (through the injected resolver) to 127.0.0.1, which
    # the allow-list names by host: the server sees the name in Host.
    web.pages["/named"] = Page(b"named", "text/plain")
    allow = AllowList.of(hosts=["docs.example"])
    got = await fetch_url(
        web.url("/named", host="docs.example"),
        settings(allow),
        resolver=resolver_to({"docs.example": "127.0.0.1"}),  # type: ignore[arg-type]
    )
    assert isinstance(got, Fetched)
    assert web.hits("/named")[-1]["host"] == f"docs.example:{web.port}"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_web(pki: Pki) -> Iterator[WebStandIn]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.server_cert, pki.server_key)
    with WebStandIn(tls=ctx) as server:
        server.pages["/secure"] = Page(b"over tls", "text/plain")
        yield server


def client_tls(pki: Pki) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki.ca_cert))


async def test_https_verifies_the_certificate_against_the_host_name(
    tls_web: WebStandIn, pki: Pki
) -> None:
    # Connected to the checked address (127.0.0.1), but SNI and the certificate
    # check use the URL's host name, as if no address had been pinned.
    got = await fetch_url(
        tls_web.url("/secure", host="localhost"),
        settings(AllowList.of(hosts=["localhost"])),
        ssl_context=client_tls(pki),
    )
    assert isinstance(got, Fetched) and got.body == b"over tls"
    assert tls_web.sni_names[-1] == "localhost"


async def test_https_to_a_name_the_certificate_does_not_cover_fails(
    tls_web: WebStandIn, pki: Pki
) -> None:
    # docs.example resolves to 127.0.0.1, which the certificate names; a client
    # that connected "by IP" would accept it. Verification is against the name.
    err = await refusal_of(
        tls_web.url("/secure", host="docs.example"),
        settings(AllowList.of(hosts=["docs.example"])),
        resolver=resolver_to({"docs.example": "127.0.0.1"}),
        ssl_context=client_tls(pki),
    )
    assert err.failure is FetchFailure.TLS_FAILED
    assert tls_web.sni_names[-1] == "docs.example"


async def test_https_with_an_untrusted_certificate_fails(tls_web: WebStandIn) -> None:
    err = await refusal_of(
        tls_web.url("/secure", host="localhost"), settings(AllowList.of(hosts=["localhost"]))
    )
    assert err.failure is FetchFailure.TLS_FAILED


async def test_the_connection_uses_the_answer_that_was_checked(web: WebStandIn) -> None:
    # DNS rebinding: the first answer passes the check, every later one would not.
    # The fetcher resolves once per connection and connects to what it checked.
    web.pages["/rebind"] = Page(b"first answer", "text/plain")
    answers = ["127.0.0.1"]
    calls: list[str] = []

    async def rebinding(host: str, port: int) -> list[IPAddress]:
        calls.append(host)
        return [ipaddress.ip_address(answers[0])]

    original = web.hits("/rebind")
    got = await fetch_url(web.url("/rebind", host="rebind.example"), settings(), resolver=rebinding)
    answers[0] = "10.0.0.1"
    assert isinstance(got, Fetched) and got.body == b"first answer"
    assert calls == ["rebind.example"] and len(web.hits("/rebind")) == len(original) + 1
    # The next fetch resolves again and is refused on the new answer.
    err = await refusal_of(web.url("/rebind", host="rebind.example"), resolver=rebinding)
    assert err.refusal == "PRIVATE_ADDRESS"


async def test_a_redirect_to_another_allowed_origin_opens_a_new_checked_connection(
    web: WebStandIn,
) -> None:
    web.pages["/hop"] = Page(status=308, location=web.url("/landing", host="docs.example"))
    web.pages["/landing"] = Page(b"other origin", "text/plain")
    seen: list[str] = []

    async def resolve(host: str, port: int) -> list[IPAddress]:
        seen.append(host)
        return [ipaddress.ip_address("127.0.0.1")]

    allow = AllowList.of(hosts=["docs.example"], cidrs=["127.0.0.1/32"])
    got = await fetch_url(web.url("/hop"), settings(allow), resolver=resolve)
    assert isinstance(got, Fetched) and got.body == b"other origin" and got.redirects == 1
    assert seen == ["127.0.0.1", "docs.example"]
    assert web.hits("/landing")[-1]["host"] == f"docs.example:{web.port}"


# --- the refusal matrix, one by one --------------------------------------------------


@pytest.mark.parametrize(
    ("url", "refusal"),
    [
        ("ftp://example.com/a", UrlRefusal.SCHEME_NOT_ALLOWED),
        ("file:///etc/passwd", UrlRefusal.SCHEME_NOT_ALLOWED),
        ("gopher://example.com/", UrlRefusal.SCHEME_NOT_ALLOWED),
        ("http://user:secret@example.com/", UrlRefusal.CREDENTIALS_IN_URL),
        ("http://secret@example.com/", UrlRefusal.CREDENTIALS_IN_URL),
        ("http:///nohost", UrlRefusal.MALFORMED_URL),
        ("http://exa mple.com/", UrlRefusal.MALFORMED_URL),
    ],
)
async def test_refuses_urls_by_shape(url: str, refusal: UrlRefusal) -> None:
    err = await refusal_of(url)
    assert (err.failure, err.refusal) == (FetchFailure.REFUSED, refusal.value)


async def test_refuses_loopback_without_the_allow_list(web: WebStandIn) -> None:
    web.pages["/loop"] = Page(b"x", "text/plain")
    before = len(web.hits("/loop"))
    err = await refusal_of(web.url("/loop"), settings(AllowList()))
    assert (err.failure, err.refusal) == (FetchFailure.REFUSED, "LOOPBACK_ADDRESS")
    assert err.origin == f"http://127.0.0.1:{web.port}"
    assert len(web.hits("/loop")) == before  # never connected


async def test_refuses_localhost_by_its_resolved_address(web: WebStandIn) -> None:
    err = await refusal_of(f"http://localhost:{web.port}/x", settings(AllowList()))
    assert err.refusal == "LOOPBACK_ADDRESS"


@pytest.mark.parametrize(
    ("address", "refusal"),
    [
        ("10.1.2.3", "PRIVATE_ADDRESS"),
        ("172.16.0.9", "PRIVATE_ADDRESS"),
        ("192.168.1.1", "PRIVATE_ADDRESS"),
        ("169.254.169.254", "METADATA_ADDRESS"),
        ("169.254.10.10", "LINK_LOCAL_ADDRESS"),
        ("fe80::1", "LINK_LOCAL_ADDRESS"),
        ("fd00:ec2::254", "METADATA_ADDRESS"),
        ("fd12:3456::1", "UNIQUE_LOCAL_ADDRESS"),
        ("100.64.0.1", "CGNAT_ADDRESS"),
        ("100.100.100.200", "METADATA_ADDRESS"),
        ("168.63.129.16", "METADATA_ADDRESS"),
        ("::1", "LOOPBACK_ADDRESS"),
        ("::ffff:127.0.0.1", "LOOPBACK_ADDRESS"),
        ("::ffff:169.254.169.254", "METADATA_ADDRESS"),
        ("64:ff9b::a01:203", "PRIVATE_ADDRESS"),
        ("2002:a00:1::1", "PRIVATE_ADDRESS"),
        ("0.0.0.0", "PRIVATE_ADDRESS"),
        ("224.0.0.1", "MULTICAST_ADDRESS"),
        ("240.0.0.1", "PRIVATE_ADDRESS"),
    ],
)
async def test_refuses_a_name_that_resolves_to_a_non_public_address(
    address: str, refusal: str
) -> None:
    resolve = resolver_to({"intranet.example": address})
    err = await refusal_of("http://intranet.example/page?token=secret", resolver=resolve)
    assert (err.failure, err.refusal) == (FetchFailure.REFUSED, refusal)
    assert err.origin == "http://intranet.example"


async def test_refuses_a_name_with_any_non_public_address() -> None:
    async def resolve(host: str, port: int) -> list[IPAddress]:
        return [ipaddress.ip_address("93.184.215.14"), ipaddress.ip_address("10.0.0.5")]

    err = await refusal_of("http://mixed.example/", resolver=resolve)
    assert err.refusal == "PRIVATE_ADDRESS"


async def test_refuses_a_redirect_to_a_private_address(web: WebStandIn) -> None:
    web.pages["/to-private"] = Page(status=302, location="http://10.0.0.7/admin?key=secret")
    err = await refusal_of(web.url("/to-private"))
    assert (err.failure, err.refusal) == (FetchFailure.REFUSED, "PRIVATE_ADDRESS")
    assert err.origin == "http://10.0.0.7"


async def test_refuses_a_redirect_to_the_metadata_service(web: WebStandIn) -> None:
    web.pages["/to-imds"] = Page(status=307, location="http://169.254.169.254/latest/meta-data/")
    err = await refusal_of(web.url("/to-imds"))
    assert err.refusal == "METADATA_ADDRESS"


async def test_refuses_a_redirect_to_another_scheme_or_with_credentials(web: WebStandIn) -> None:
    web.pages["/to-file"] = Page(status=302, location="file:///etc/passwd")
    web.pages["/to-creds"] = Page(status=302, location="http://u:secret@example.com/")
    assert (await refusal_of(web.url("/to-file"))).refusal == "SCHEME_NOT_ALLOWED"
    assert (await refusal_of(web.url("/to-creds"))).refusal == "CREDENTIALS_IN_URL"


async def test_a_redirect_without_a_usable_location_fails(web: WebStandIn) -> None:
    web.pages["/no-location"] = Page(status=302)
    web.pages["/bad-location"] = Page(status=302, location="http://exa mple.com/?k=secret")
    web.pages["/odd-location"] = Page(status=302, location="/caf\u00e9 menu")
    assert (await refusal_of(web.url("/no-location"))).failure is FetchFailure.BAD_REDIRECT
    assert (await refusal_of(web.url("/bad-location"))).refusal == "MALFORMED_URL"
    assert (await refusal_of(web.url("/odd-location"))).refusal == "MALFORMED_URL"


async def test_refuses_too_many_redirects(web: WebStandIn) -> None:
    web.pages["/loop1"] = Page(status=302, location="/loop2")
    web.pages["/loop2"] = Page(status=302, location="/loop1")
    err = await refusal_of(web.url("/loop1"))
    assert err.failure is FetchFailure.TOO_MANY_REDIRECTS
    assert len(web.hits("/loop1")) + len(web.hits("/loop2")) == 4  # 1 + max_redirects


async def test_refuses_a_body_larger_than_the_bound(web: WebStandIn) -> None:
    web.pages["/big"] = Page(b"x" * 5000, "text/plain")
    err = await refusal_of(web.url("/big"), settings(max_bytes=4096))
    assert err.failure is FetchFailure.TOO_LARGE


async def test_refuses_a_large_body_without_content_length_while_streaming(
    web: WebStandIn,
) -> None:
    web.pages["/stream"] = Page(b"y" * 200_000, "text/plain", send_length=False)
    err = await refusal_of(web.url("/stream"), settings(max_bytes=4096))
    assert err.failure is FetchFailure.TOO_LARGE


async def test_refuses_a_media_type_no_loader_reads(web: WebStandIn) -> None:
    web.pages["/bin"] = Page(b"\x00\x01", "application/octet-stream")
    web.pages["/none"] = Page(b"?", "")
    assert (await refusal_of(web.url("/bin"))).failure is FetchFailure.UNSUPPORTED_MEDIA_TYPE
    assert (await refusal_of(web.url("/none"))).failure is FetchFailure.UNSUPPORTED_MEDIA_TYPE


async def test_refuses_a_content_encoding(web: WebStandIn) -> None:
    web.pages["/gz"] = Page(b"\x1f\x8b", "text/plain", headers={"Content-Encoding": "gzip"})
    assert (await refusal_of(web.url("/gz"))).failure is FetchFailure.UNSUPPORTED_ENCODING


async def test_times_out_on_a_slow_server(web: WebStandIn) -> None:
    web.pages["/slow"] = Page(b"late", "text/plain", delay=30.0)
    started = time.monotonic()
    err = await refusal_of(web.url("/slow"), settings(read_timeout=0.3))
    assert err.failure is FetchFailure.TIMEOUT
    # Far below the 30 s answer; holds on a loaded machine (load 10 on 2 cores).
    assert time.monotonic() - started < 10


async def test_an_http_error_status_fails(web: WebStandIn) -> None:
    err = await refusal_of(web.url("/missing?token=secret"))
    assert (err.failure, err.status) == (FetchFailure.HTTP_STATUS, 404)


async def test_a_refused_connection_fails_without_the_url() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = await refusal_of(f"http://127.0.0.1:{port}/x?token=secret")
    assert err.failure is FetchFailure.CONNECT_FAILED


# --- the pure policy ------------------------------------------------------------------


def test_public_addresses_pass_and_the_allow_list_opens_exactly_what_it_names() -> None:
    assert address_refusal(ipaddress.ip_address("93.184.215.14")) is None
    assert address_refusal(ipaddress.ip_address("2606:4700::1111")) is None
    allow = AllowList.of(hosts=["Wiki.Internal."], cidrs=["10.1.0.0/16"])
    assert allow.permits_host("wiki.internal")
    assert allow.permits_address(ipaddress.ip_address("10.1.2.3"))
    assert not allow.permits_address(ipaddress.ip_address("10.2.0.1"))


def test_check_url_keeps_the_query_out_of_the_origin() -> None:
    checked = check_url("https://Example.COM:8443/a/b?token=secret#frag")
    assert checked.origin == "https://example.com:8443"
    assert checked.target == "/a/b?token=secret"
    with pytest.raises(UrlRefused) as info:
        check_url("HTTP://user@example.com")
    assert "user" not in str(info.value)
