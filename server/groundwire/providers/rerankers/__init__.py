"""Rerankers behind one provider-neutral protocol (`base.Reranker`), one module each."""
