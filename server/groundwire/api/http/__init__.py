"""The HTTP port: projections of the gRPC contract (Connect, the OpenAI-compatible
facade, MCP over streamable HTTP) served by the same process, handlers and
interceptor as the gRPC port. `app.build_http_app` is the one place that
assembles it; `server.HttpServer` runs it."""
