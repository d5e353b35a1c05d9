"""gRPC servicers (proto <-> domain translation only), interceptors, health, reflection."""
