"""groundwire: retrieval-augmented generation served over gRPC."""

__version__ = "0.1.0"
