"""Pure value types and rules: no I/O, no protobuf, no gRPC."""
