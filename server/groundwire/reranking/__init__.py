"""The reranking engine: the stage shared by RerankerService and the agent runtime."""
