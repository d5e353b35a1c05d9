"""The HTTP rules every remote provider shares: one base-URL rule that the
configuration and the adapters apply alike, and one classification of transport
failures and HTTP statuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from groundwire.app.agent_config import OpenAIModelConfig
from groundwire.app.config import OpenAICompatibleEmbedderConfig
from groundwire.app.reranker_config import CohereRerankerConfig, OpenRerankConfig
from groundwire.providers.chat.openai_chat import OpenAIChatModel
from groundwire.providers.embeddings.openai_compat import OpenAICompatibleEmbedder
from groundwire.providers.http import (
    RemoteFailureKind,
    failure_for_status,
    failure_for_transport_error,
    normalize_base_url,
)
from groundwire.providers.rerankers.cohere import CohereReranker
from groundwire.providers.rerankers.open_rerank import OpenRerankReranker

GOOD = [
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("https://api.example.com/v1/", "https://api.example.com/v1"),
    ("HTTPS://api.example.com/v1", "HTTPS://api.example.com/v1"),
    ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
]
BAD = [
    "127.0.0.1:8000/v1",  # no scheme
    "ftp://127.0.0.1/v1",
    "http://",  # no host
    "http:///v1",
    "http://:8080",
    "http://h:port",  # not a port number
    "http://[::1",  # unterminated IPv6 literal
    "http://user:secret@h/v1",  # credentials belong in api_key
    "http://h/v1?api-version=1",  # paths are appended: the query would swallow them
    "http://h/v1?",
    "http://h/v1#frag",
    "http://h/v 1",
    "http://h/v1\n",
]

# Each place a base URL enters: the config sections and the adapters.
Builder = Callable[[str], Any]
BUILDERS: dict[str, Builder] = {
    "embedder config": lambda u: (
        OpenAICompatibleEmbedderConfig(
            kind="openai-compatible", base_url=u, model="m", dimensions=3
        ).base_url
    ),
    "model config": lambda u: OpenAIModelConfig(kind="openai-compatible", base_url=u).base_url,
    "cohere config": lambda u: (
        CohereRerankerConfig(kind="cohere", api_key={"env": "K"}, base_url=u).base_url
    ),
    "open-rerank config": lambda u: OpenRerankConfig(kind="open-rerank", base_url=u).base_url,
    "embedder": lambda u: OpenAICompatibleEmbedder(base_url=u, model="m", dimensions=3),
    "chat model": lambda u: OpenAIChatModel(base_url=u, model="m"),
    "cohere reranker": lambda u: CohereReranker(api_key="k", base_url=u),
    "open-rerank reranker": lambda u: OpenRerankReranker(base_url=u),
}


@pytest.mark.parametrize(("url", "normalized"), GOOD)
def test_the_rule_accepts_absolute_http_urls_without_trailing_slash(
    url: str, normalized: str
) -> None:
    assert normalize_base_url(url) == normalized


@pytest.mark.parametrize("url", BAD)
def test_the_rule_rejects_with_a_content_free_message(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        normalize_base_url(url)
    assert "secret" not in str(caught.value) and "api-version" not in str(caught.value)


@pytest.mark.parametrize("where", sorted(BUILDERS))
@pytest.mark.parametrize("url", BAD)
def test_every_entry_point_rejects_what_the_rule_rejects(where: str, url: str) -> None:
    # Before one rule, configuration accepted "http://" and "http://u:p@h" (the
    # adapter then failed at start-up, or sent credentials in the URL) and every
    # place accepted a query that the appended path would have ended up inside.
    with pytest.raises(ValueError):
        BUILDERS[where](url)


@pytest.mark.parametrize("where", sorted(k for k in BUILDERS if k.endswith("config")))
@pytest.mark.parametrize(("url", "normalized"), GOOD)
def test_configuration_keeps_what_the_adapters_accept(
    where: str, url: str, normalized: str
) -> None:
    # Configuration used to refuse an upper-case scheme that the adapters took.
    assert BUILDERS[where](url) == normalized


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, RemoteFailureKind.RATE_LIMITED),
        (500, RemoteFailureKind.SERVER_ERROR),
        (503, RemoteFailureKind.SERVER_ERROR),
        (400, RemoteFailureKind.REJECTED),
        (401, RemoteFailureKind.REJECTED),
        (404, RemoteFailureKind.REJECTED),
        (307, RemoteFailureKind.UNEXPECTED_STATUS),
        (101, RemoteFailureKind.UNEXPECTED_STATUS),
    ],
)
def test_statuses_are_classified_once(status: int, kind: RemoteFailureKind) -> None:
    failure = failure_for_status(status)
    assert failure is not None and failure.kind is kind
    assert f"HTTP {status}" in failure.message("provider")


def test_a_2xx_status_is_no_failure() -> None:
    assert failure_for_status(200) is None and failure_for_status(204) is None


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (TimeoutError(), RemoteFailureKind.TIMEOUT),
        (httpx.ReadTimeout("secret body"), RemoteFailureKind.TIMEOUT),
        (httpx.ConnectTimeout("secret body"), RemoteFailureKind.TIMEOUT),
        (httpx.ConnectError("secret body"), RemoteFailureKind.CONNECTION),
        (httpx.RemoteProtocolError("secret body"), RemoteFailureKind.CONNECTION),
        (httpx.ReadError("secret body"), RemoteFailureKind.CONNECTION),
    ],
)
def test_transport_errors_are_classified_by_type_only(
    exc: BaseException, kind: RemoteFailureKind
) -> None:
    failure = failure_for_transport_error(exc)
    assert failure.kind is kind
    assert "secret" not in failure.message("provider")
