"""Server TLS whose certificate, key and client CA can be rotated without a
restart.

The server is bound once with gRPC's dynamic SSL credentials: before every new
TLS handshake gRPC asks `_fetch` whether the certificate configuration changed.
A configuration reload (app/reload.py) re-reads the files named in
`server.tls` (the same paths after a renewal, or new ones), checks them as a
TLS server would load them (the key matches the certificate, the CA parses),
and stages them; new connections then handshake with them, open ones keep
theirs. Turning TLS on or off, or mutual TLS on or off, changes how the port
was bound: that needs a restart (RESTART_ONLY in app/reload.py).

Errors name the key and never the path or the file's content."""

from __future__ import annotations

import ssl
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import cast

import grpc

from groundwire.app.config import GroundwireConfig, TlsConfig
from groundwire.app.config_base import ConfigError


def load_certificates(tls: TlsConfig) -> grpc.ServerCertificateConfiguration:
    """The certificate configuration of `tls`, checked; ConfigError naming the key."""
    try:
        cert, key = tls.cert_file.read_bytes(), tls.key_file.read_bytes()
        ca = tls.client_ca_file.read_bytes() if tls.client_ca_file else None
    except OSError:
        raise ConfigError("server.tls: cannot read the certificate, key or CA file") from None
    _check_pair(cert, key)
    if ca is not None:
        _check_ca(ca)
    return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)


def _check_pair(cert: bytes, key: bytes) -> None:
    # gRPC would accept anything here and fail every handshake later: load the pair
    # the way a TLS server does first. The ssl module reads only files, so the
    # bytes (read once above) go through a private temporary directory.
    with tempfile.TemporaryDirectory() as tmp:
        cert_path, key_path = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        cert_path.write_bytes(cert)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_path, key_path)
        except (ssl.SSLError, ValueError):
            raise ConfigError(
                "server.tls.cert_file: the certificate and key do not load as a matching pair"
            ) from None


def _check_ca(ca: bytes) -> None:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(
            cadata=ca.decode("ascii", errors="strict")
        )
    except (ssl.SSLError, ValueError, UnicodeDecodeError):
        raise ConfigError("server.tls.client_ca_file: not a PEM CA certificate bundle") from None


class RotatingTls:
    """The server's TLS credentials and the certificates staged for the next
    handshake."""

    def __init__(self, tls: TlsConfig) -> None:
        self._initial = load_certificates(tls)
        self._require_client_auth = tls.client_ca_file is not None
        self._lock = threading.Lock()  # the fetcher runs on a gRPC core thread
        self._staged: grpc.ServerCertificateConfiguration | None = None

    def credentials(self) -> grpc.ServerCredentials:
        # gRPC documents None from the fetcher as "no change"; its stubs omit it.
        fetch = cast("Callable[[], grpc.ServerCertificateConfiguration]", self._fetch)
        return grpc.dynamic_ssl_server_credentials(
            self._initial, fetch, require_client_authentication=self._require_client_auth
        )

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's question before a handshake: None keeps the current certificates."""
        with self._lock:
            staged, self._staged = self._staged, None
        return staged

    def stage(self, certificates: grpc.ServerCertificateConfiguration) -> None:
        """Serve `certificates` from the next handshake on."""
        with self._lock:
            self._staged = certificates


def server_tls(cfg: GroundwireConfig) -> RotatingTls | None:
    """The server's rotating TLS, or None for a plaintext port."""
    return RotatingTls(cfg.server.tls) if cfg.server.tls is not None else None
