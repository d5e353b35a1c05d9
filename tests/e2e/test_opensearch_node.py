"""A real OpenSearch from scripts/opensearch_node.py, on both release lines: the
session's shared node (3.x, Lucene 10, Java 21+) and a 2.19 node of its own (Java 17)
serve BM25 (english analyzer) and filtered k-NN (lucene engine, HNSW, cosine). Three
nodes losing their elected cluster-manager: tests/integration/test_opensearch_failover.py."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import pytest

from tests.support.opensearch import CURRENT, PREVIOUS, node_module, opensearch_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

T = TypeVar("T")

MAPPING: dict[str, Any] = {
    "settings": {"index": {"knn": True, "number_of_shards": 1, "number_of_replicas": 0}},
    "mappings": {
        "properties": {
            "text": {"type": "text", "analyzer": "english"},
            "tenant": {"type": "keyword"},
            "embedding": {
                "type": "knn_vector",
                "dimension": 4,
                "method": {
                    "name": "hnsw",
                    "engine": "lucene",
                    "space_type": "cosinesimil",
                    "parameters": {"m": 16, "ef_construction": 64},
                },
            },
        }
    },
}

DOCS: dict[str, dict[str, Any]] = {
    "d1": {
        "text": "Employees may take parental leave for sixteen weeks.",
        "tenant": "a",
        "embedding": [1.0, 0.0, 0.0, 0.0],
    },
    "d2": {
        "text": "The office closes on public holidays.",
        "tenant": "a",
        "embedding": [0.0, 1.0, 0.0, 0.0],
    },
    "d3": {
        "text": "Contractors are not entitled to parental leaves.",
        "tenant": "b",
        "embedding": [0.9, 0.1, 0.0, 0.0],
    },
    "d4": {
        "text": "Expense reports are due every month.",
        "tenant": "b",
        "embedding": [0.0, 0.0, 1.0, 0.0],
    },
    "d5": {
        "text": "Holiday requests go to the team lead.",
        "tenant": "b",
        "embedding": [0.0, 0.9, 0.1, 0.0],
    },
}


def eventually(check: Callable[[], T], timeout: float = 120.0, what: str = "condition") -> T:
    """Poll `check` until it returns without raising; re-raise its last error late."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, httpx.HTTPError) as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not reached in {timeout}s: {exc!r}") from exc
        time.sleep(0.25)


def ok(response: httpx.Response) -> Any:
    assert response.is_success, (
        f"{response.request.method} {response.request.url}: {response.status_code} {response.text}"
    )
    return response.json()


def ids(body: Any) -> list[str]:
    return [hit["_id"] for hit in body["hits"]["hits"]]


def load(client: httpx.Client, index: str, mapping: dict[str, Any]) -> None:
    ok(client.put(f"/{index}", json=mapping))
    lines = []
    for doc_id, doc in DOCS.items():
        lines.append({"index": {"_index": index, "_id": doc_id}})
        lines.append(doc)
    payload = "".join(json.dumps(line) + "\n" for line in lines)
    body = ok(
        client.post(
            "/_bulk",
            params={"refresh": "true"},
            content=payload,
            headers={"content-type": "application/x-ndjson"},
        )
    )
    assert body["errors"] is False, body


def test_current_line_bm25_and_filtered_knn(opensearch_url: str) -> None:
    """The shared node is the current line, 3.x on Lucene 10 (the one the store contract
    suite runs on), and it refuses the nmslib engine 3.0 removed for new indexes."""
    root = check_bm25_and_filtered_knn(opensearch_url, node_module().line_of(CURRENT).version)
    assert root["version"]["lucene_version"].startswith("10.")
    with httpx.Client(base_url=opensearch_url, timeout=60) as client:
        # Java 21+ with the Vector API module: Lucene's vector distances run on SIMD.
        (jvm,) = (n["jvm"] for n in ok(client.get("/_nodes/_local/jvm"))["nodes"].values())
        assert int(jvm["version"].split(".")[0]) >= 21, jvm["version"]
        assert "--add-modules=jdk.incubator.vector" in jvm["input_arguments"]
        nmslib = json.loads(json.dumps(MAPPING))
        nmslib["mappings"]["properties"]["embedding"]["method"]["engine"] = "nmslib"
        index = f"gw-e2e-nmslib-{time.monotonic_ns()}"
        try:
            refused = client.put(f"/{index}", json=nmslib)
            assert refused.status_code == 400 and "nmslib" in refused.text, refused.text
        finally:
            client.delete(f"/{index}")


def test_previous_line_bm25_and_filtered_knn() -> None:
    """A 2.19 node of its own (Lucene 9, Java 17): the line the failover test runs on."""
    with opensearch_cluster(1, PREVIOUS) as cluster:
        root = check_bm25_and_filtered_knn(cluster.url, node_module().line_of(PREVIOUS).version)
    assert root["version"]["lucene_version"].startswith("9.")


def check_bm25_and_filtered_knn(url: str, version: str) -> Any:
    """Stemmed BM25, k-NN, and Lucene's filtered k-NN on the node at `url`, which runs
    OpenSearch `version`; returns the node's root document."""
    index = f"gw-e2e-{time.monotonic_ns()}"
    with httpx.Client(base_url=url, timeout=60) as client:
        try:
            root = ok(client.get("/"))
            assert root["version"]["number"] == version
            load(client, index, MAPPING)

            # BM25 through the english analyzer: "leaving" and "leaves" both stem to "leav".
            body = ok(
                client.post(
                    f"/{index}/_search", json={"query": {"match": {"text": "leaving parents"}}}
                )
            )
            assert sorted(ids(body)) == ["d1", "d3"]
            assert all(hit["_score"] > 0 for hit in body["hits"]["hits"])

            # k-NN without a filter: the nearest to [1,0,0,0] is d1, then d3.
            knn = {"embedding": {"vector": [1.0, 0.0, 0.0, 0.0], "k": 2}}
            body = ok(client.post(f"/{index}/_search", json={"size": 2, "query": {"knn": knn}}))
            assert ids(body) == ["d1", "d3"]

            # Lucene filtered k-NN: only tenant b, so d3 first and d1 never.
            knn["embedding"]["filter"] = {"term": {"tenant": "b"}}
            body = ok(client.post(f"/{index}/_search", json={"size": 2, "query": {"knn": knn}}))
            assert ids(body)[0] == "d3"
            assert {hit["_source"]["tenant"] for hit in body["hits"]["hits"]} == {"b"}
            assert "d1" not in ids(body)
        finally:
            client.delete(f"/{index}")
    return root
