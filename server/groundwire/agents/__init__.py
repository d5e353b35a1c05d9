"""The agent runtime: RAG policy pipeline, prompt assembly, model and tool loop."""
