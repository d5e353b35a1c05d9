"""The connection options every command-line client of the public API shares
(`groundwire mcp`, `search`, `ask`, `indexes`, `operations`, `push`, `ingest`,
`reload`): the server's address, TLS (server CA, the certificate's name, client
certificate for mutual TLS) and the API key, read from an environment variable so
it never appears in a process list or a shell history."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

import grpc

from groundwire_client import GroundwireClient
from groundwire_client._common import call_metadata as client_call_metadata
from groundwire_client._common import check_api_key

DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_KEY_ENV = "GROUNDWIRE_API_KEY"
# A DNS name or an IP address literal, as a certificate may carry.
_HOST_NAME = re.compile(r"^[A-Za-z0-9.:_-]{1,253}$")


class OptionError(Exception):
    """A connection option that cannot be used (the message says which)."""


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--address", default=DEFAULT_ADDRESS, help=f"server HOST:PORT (default {DEFAULT_ADDRESS})"
    )
    group.add_argument(
        "--api-key-env",
        metavar="VAR",
        help=(
            "environment variable holding the API key (default: "
            f"{DEFAULT_KEY_ENV} when set, else no key)"
        ),
    )
    group.add_argument("--tls", action="store_true", help="connect with TLS (system CAs)")
    group.add_argument(
        "--ca-file", metavar="PEM", help="CA certificate(s) to verify the server (implies --tls)"
    )
    group.add_argument(
        "--server-name",
        metavar="NAME",
        help=(
            "name the server's certificate must carry, when it is not the --address host"
            " (implies --tls)"
        ),
    )
    group.add_argument("--client-cert", metavar="PEM", help="client certificate for mutual TLS")
    group.add_argument("--client-key", metavar="PEM", help="client private key for mutual TLS")
    group.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="deadline of each call in seconds (default 120)",
    )
    group.add_argument(
        "--act-for",
        metavar="PRINCIPALS",
        help=(
            "comma-separated principals of the end user an act_for key calls for"
            " (user:ID,group:ID): the answers are those that user may read"
        ),
    )


@dataclass(frozen=True, slots=True)
class Connection:
    address: str
    api_key: str | None
    credentials: grpc.ChannelCredentials | None
    timeout: float
    # The certificate name checked instead of the address's host (--server-name).
    server_name: str | None = None
    # The end user's principals an `act_for` key names on every call (--act-for).
    principals: tuple[str, ...] | None = None

    @property
    def options(self) -> tuple[tuple[str, str], ...]:
        """The channel arguments the options ask for."""
        if self.server_name is None:
            return ()
        return (("grpc.ssl_target_name_override", self.server_name),)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The API key (and --act-for principals) as call metadata, for calls made
        on the client's stubs directly."""
        return client_call_metadata(self.api_key, self.principals)

    def channel(self) -> grpc.aio.Channel:
        """A channel of its own, for the commands that call the stubs directly."""
        return open_channel(self.address, self.credentials, self.options)

    def client(self) -> GroundwireClient:
        return GroundwireClient(
            self.address,
            api_key=self.api_key,
            credentials=self.credentials,
            timeout=self.timeout,
            options=self.options,
            principals=self.principals,
        )


def open_channel(
    address: str,
    credentials: grpc.ChannelCredentials | None,
    options: Sequence[tuple[str, str]] = (),
) -> grpc.aio.Channel:
    """An asyncio channel to `address`, over TLS when `credentials` are given."""
    if credentials is not None:
        return grpc.aio.secure_channel(address, credentials, options=list(options))
    return grpc.aio.insecure_channel(address, options=list(options))


def _read(flag: str, path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        raise OptionError(f"{flag}: cannot read the file") from None


def connection(args: argparse.Namespace) -> Connection:
    """The connection the parsed options describe; OptionError when unusable."""
    var = args.api_key_env
    api_key: str | None = None
    if var:
        api_key = os.environ.get(var)
        if not api_key:
            raise OptionError(f"--api-key-env: the environment variable {var} is not set")
    else:
        api_key = os.environ.get(DEFAULT_KEY_ENV) or None
    try:
        check_api_key(api_key)  # the client's own check, before it would raise
    except ValueError:
        raise OptionError("the API key holds whitespace or control characters") from None
    if (args.client_cert is None) != (args.client_key is None):
        raise OptionError("--client-cert and --client-key go together")
    server_name = args.server_name
    if server_name is not None and not _HOST_NAME.match(server_name):
        raise OptionError("--server-name: not a host name")
    tls = bool(args.tls or args.ca_file or args.client_cert or server_name)
    credentials = None
    if tls:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read("--ca-file", args.ca_file),
            private_key=_read("--client-key", args.client_key),
            certificate_chain=_read("--client-cert", args.client_cert),
        )
    if not (args.timeout > 0):
        raise OptionError("--timeout must be a positive number of seconds")
    principals = None
    act_for = getattr(args, "act_for", None)
    if act_for is not None:
        principals = tuple(p.strip() for p in act_for.split(",") if p.strip())
        if not principals:
            raise OptionError("--act-for: name at least one principal")
    return Connection(args.address, api_key, credentials, args.timeout, server_name, principals)


class UsageError(Exception):
    """A bad argument of a people command (exit status 2)."""


def call_metadata(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The metadata every call of a people command carries (its key), set by
    `people_cli.run` from the connection options."""
    metadata: tuple[tuple[str, str], ...] = args.call_metadata
    return metadata


def dump_json(value: object, out: TextIO) -> None:
    """A command's `--json` output: one indented JSON document."""
    out.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
