"""The web console's sign-in providers at /console/sign-in.json.

For every configured issuer with a `console_client_id`, the console gets what
the authorization code flow with PKCE needs: the provider's authorization and
token endpoints (from its OpenID Connect discovery document, fetched by the
issuer's key cache under the SSRF rules), the public client id and the scopes.
The console then sends the person to the provider, and exchanges the code for
an access token itself (the code verifier never leaves the browser); the token
is a Bearer credential like an API key, verified on every call (api/tokens.py).

The document holds no secret (public client ids and public endpoints) and
needs no credential. `connect_origins()` are the token endpoints' origins, which
the console's Content-Security-Policy allows beside its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from groundwire.api.http.asgi import Receive, Scope, Send, respond, respond_json
from groundwire.api.http.rpc import Procedures

PATH = "/console/sign-in.json"


def origin(url: str) -> str | None:
    """scheme://host[:port] of an http(s) URL, None for anything else (the value
    goes into a response header: nothing but an origin may)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname or ""
    if parts.scheme not in ("https", "http") or not host:
        return None
    if not all(c.isalnum() or c in ".-:[]" for c in host):
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


class SignInApp:
    """GET /console/sign-in.json: {"providers": [...]}."""

    def __init__(self, procedures: Procedures) -> None:
        self._procedures = procedures
        self._origins: set[str] = set()

    def connect_origins(self) -> Sequence[str]:
        """The token endpoints' origins seen so far, and the issuers' own."""
        out = set(self._origins)
        for issuer in self._procedures.token_issuers():
            if issuer.console_client_id:
                found = origin(issuer.issuer)
                if found:
                    out.add(found)
        return sorted(out)

    async def providers(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for issuer in self._procedures.token_issuers():
            if not issuer.console_client_id:
                continue
            doc = await issuer.keys.discovery()
            authorize = doc.get("authorization_endpoint")
            token = doc.get("token_endpoint")
            if not isinstance(authorize, str) or not isinstance(token, str):
                continue
            token_origin = origin(token)
            if origin(authorize) is None or token_origin is None:
                continue
            self._origins.add(token_origin)
            out.append(
                {
                    "id": issuer.id,
                    "authorizationEndpoint": authorize,
                    "tokenEndpoint": token,
                    "clientId": issuer.console_client_id,
                    "scope": issuer.console_scope,
                }
            )
        return out

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method", "GET") not in ("GET", "HEAD"):
            await respond(
                send,
                405,
                [(b"allow", b"GET, HEAD"), (b"content-type", b"text/plain; charset=utf-8")],
                b"method not allowed\n",
            )
            return
        await respond_json(
            send,
            200,
            {"providers": await self.providers()},
            [(b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff")],
        )
