"""Signing keys and tokens made in tests (with `cryptography` and PyJWT), and a
JWKS stand-in on 127.0.0.1 whose key set a test can rotate or take down.

For the token verifier's unit and security tests: nothing here talks to a real
identity provider (tests/support/keycloak.py does)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://idp.example.test/realms/acme"
AUDIENCE = "groundwire"


@dataclass
class SigningKey:
    """A private key with its `kid` and algorithm."""

    kid: str
    alg: str
    private: Any

    @classmethod
    def rsa(cls, kid: str | None = None, alg: str = "RS256") -> SigningKey:
        return cls(kid or uuid.uuid4().hex[:12], alg, rsa.generate_private_key(65537, 2048))

    @classmethod
    def ec(cls, kid: str | None = None) -> SigningKey:
        return cls(kid or uuid.uuid4().hex[:12], "ES256", ec.generate_private_key(ec.SECP256R1()))

    def public_jwk(self) -> dict[str, Any]:
        algo: Any = jwt.get_algorithm_by_name(self.alg)
        jwk: dict[str, Any] = json.loads(algo.to_jwk(self.private.public_key()))
        jwk.update(kid=self.kid, use="sig", alg=self.alg)
        return jwk

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def jwks(*keys: SigningKey) -> bytes:
    return json.dumps({"keys": [k.public_jwk() for k in keys]}).encode()


def claims(**overrides: Any) -> dict[str, Any]:
    """Valid claims for ISSUER/AUDIENCE, issued now for five minutes."""
    now = int(time.time())
    out: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "5e0c1f9a-alice",
        "iat": now,
        "exp": now + 300,
        "groups": ["/hr"],
    }
    out.update(overrides)
    return {k: v for k, v in out.items() if v is not None}


def sign(key: SigningKey, body: Mapping[str, Any] | None = None, **headers: Any) -> str:
    """A JWS of `body` (default `claims()`) signed by `key`, `kid` in the header."""
    return jwt.encode(
        dict(body if body is not None else claims()),
        key.private,
        algorithm=key.alg,
        headers={"kid": key.kid, **headers},
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(body: Mapping[str, Any], kid: str) -> str:
    """`alg: none` with an empty signature (RFC 7519 unsecured JWT)."""
    header = {"alg": "none", "typ": "JWT", "kid": kid}
    return f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(dict(body)).encode())}."


def hmac_with_public_key(key: SigningKey, body: Mapping[str, Any]) -> str:
    """The classic algorithm-confusion forgery: HS256 keyed with the issuer's
    *public* key (PEM), which an attacker knows."""
    header = {"alg": "HS256", "typ": "JWT", "kid": key.kid}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(dict(body)).encode())}"
    mac = hmac.new(key.public_pem(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


def tamper(token: str) -> str:
    """The same header and signature over different claims (sub changed)."""
    header, payload, signature = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    body["sub"] = "mallory"
    return f"{header}.{_b64(json.dumps(body).encode())}.{signature}"


@dataclass
class JwksStandIn:
    """A JWKS endpoint on 127.0.0.1 (and its OpenID discovery document): a test
    sets `keys` (rotation) or `down` (503), and reads `hits`."""

    keys: list[SigningKey] = field(default_factory=list)
    down: bool = False
    hits: int = 0
    issuer: str = ""
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks"


def serve_jwks(keys: list[SigningKey]) -> Iterator[JwksStandIn]:
    """A generator for a fixture: the stand-in serving `keys`, stopped afterwards."""
    stand_in = JwksStandIn(keys=list(keys))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            stand_in.hits += 1
            if stand_in.down:
                self.send_response(503)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            if self.path == "/jwks":
                body = jwks(*stand_in.keys)
            elif self.path == "/.well-known/openid-configuration":
                body = json.dumps(
                    {"issuer": stand_in.issuer, "jwks_uri": stand_in.jwks_url}
                ).encode()
            else:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    stand_in.issuer = stand_in.url
    stand_in._server = server
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
