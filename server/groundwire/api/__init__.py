"""gRPC servicers (proto <-> domain translation only), the one list of services, interceptors,
health, reflection."""
