"""What a long query costs over gRPC: the lexical leg scores at most the server's
term limit, the rarest terms first, and says so in the diagnostics."""

from __future__ import annotations

import time

from groundwire.app.defaults import HANDBOOK_DIR
from groundwire_client.v1 import retriever_pb2, retriever_pb2_grpc

LEXICAL = retriever_pb2.RETRIEVAL_MODE_LEXICAL
HYBRID = retriever_pb2.RETRIEVAL_MODE_HYBRID


def handbook_words() -> list[str]:
    words: dict[str, None] = {}
    for path in sorted(HANDBOOK_DIR.rglob("*.md")):
        for word in path.read_text().lower().split():
            if word.isalpha():
                words[word] = None
    return list(words)


async def test_a_pasted_page_scores_only_its_rarest_terms(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    words = handbook_words()
    assert len(words) > 400
    text = " ".join(words[:400])[:4096]
    # The demo index analyzes with the default analyzer (stems, drops stop words).
    from groundwire.domain.analysis import ENGLISH

    distinct = len(set(ENGLISH.terms(text)))
    assert distinct > 200
    for mode in (LEXICAL, HYBRID):
        t0 = time.monotonic()
        resp = await retriever.Retrieve(
            retriever_pb2.RetrieveRequest(
                query=retriever_pb2.RagQuery(index_name="demo", text=text, mode=mode, top_k=5)
            ),
            timeout=10,
        )
        elapsed = time.monotonic() - t0
        d = resp.diagnostics
        assert d.lexical_terms_scored == 32
        # Every term comes from the handbook, so only the limit leaves terms out
        # (but the last word, which the 4,096-character bound may cut).
        assert d.lexical_terms_pruned >= distinct - 32 - 1
        assert len(resp.results) == 5
        assert elapsed < 5.0


async def test_short_queries_are_not_pruned(
    retriever: retriever_pb2_grpc.RetrieverServiceAsyncStub,
) -> None:
    resp = await retriever.Retrieve(
        retriever_pb2.RetrieveRequest(
            query=retriever_pb2.RagQuery(
                index_name="demo", text="parental leave POL-HR-014 zzzunknown", mode=LEXICAL
            )
        ),
        timeout=10,
    )
    d = resp.diagnostics
    # pol-hr-014 is indexed whole and as pol / hr / 014; the unknown word counts nowhere.
    assert d.lexical_terms_scored == 6 and d.lexical_terms_pruned == 0
