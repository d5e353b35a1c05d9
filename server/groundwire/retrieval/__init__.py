"""The retrieval engine: semantic, lexical and hybrid search over a named index."""
