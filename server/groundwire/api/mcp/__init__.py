"""The Model Context Protocol surface: the tools (tools.py), shared by the
streamable HTTP mount on the HTTP port (api/http/mcp.py) and the stdio bridge
of `groundwire mcp` (app/mcp_cli.py)."""
