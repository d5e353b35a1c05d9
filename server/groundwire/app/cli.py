"""`groundwire serve [--config FILE] [--address HOST:PORT]`."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from pathlib import Path

from groundwire.app.config import ConfigError, GroundwireConfig, load_config
from groundwire.app.defaults import default_config
from groundwire.app.logs import configure_logging

log = logging.getLogger("groundwire.app")
_GIL_SWITCH_S = 0.001


async def _serve(
    cfg: GroundwireConfig,
    address: str | None,
    config_path: Path | None,
    http_address: str | None = None,
) -> int:
    from groundwire.app.lifecycle import start_app

    # Searches, tokenizing and hashing run in worker threads; the event loop must get
    # the GIL back quickly to keep serving other callers meanwhile (the default 5 ms
    # switch interval let CPU-bound workers add tens of ms to every small request).
    sys.setswitchinterval(_GIL_SWITCH_S)
    app = await start_app(cfg, address, config_path, http_address)
    # What start-up allocated (modules, gRPC, protobuf, the configured indexes) lives
    # as long as the process: out of the cyclic collector's full passes, which would
    # otherwise rescan it and pause every request for tens of milliseconds.
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    reloads: set[asyncio.Task[None]] = set()
    if app.reloader is not None:
        reloader = app.reloader
        reloader.manage_logging = True

        def on_sighup() -> None:
            # Reloads are serialized inside; keep a reference until each ends.
            task = asyncio.create_task(reloader.reload_on_signal())
            reloads.add(task)
            task.add_done_callback(reloads.discard)

        loop.add_signal_handler(signal.SIGHUP, on_sighup)
    await stop.wait()
    log.info("shutting down", extra={"grace_seconds": cfg.server.grace_period_seconds})
    await app.stop()
    log.info("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["eval"]:
        # Routed before argparse: the evaluation CLI has its own subcommands and help.
        from groundwire.evaluation.cli import main as eval_main

        return eval_main(args_in[1:])
    parser = argparse.ArgumentParser(prog="groundwire", description="groundwire RAG service")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "eval", help="evaluate a running server on BEIR collections (groundwire eval --help)"
    )
    serve = sub.add_parser("serve", help="serve the gRPC API")
    serve.add_argument("--config", type=Path, help="TOML configuration (default: embedded demo)")
    serve.add_argument("--address", help="listen address HOST:PORT (overrides the config)")
    serve.add_argument(
        "--http-address", help="HTTP (Connect, OpenAI facade) address HOST:PORT (overrides [http])"
    )
    check = sub.add_parser("check-config", help="validate a configuration file and exit")
    check.add_argument("config", type=Path)
    from groundwire.app.client_options import add_connection_args

    ingest = sub.add_parser("ingest", help="ingest an index through a running server")
    ingest.add_argument("index")
    add_connection_args(ingest)
    reload = sub.add_parser(
        "reload", help="reload a running server's configuration file (like SIGHUP)"
    )
    add_connection_args(reload)
    reload.add_argument(
        "--validate-only", action="store_true", help="check the file, apply nothing"
    )
    keys = sub.add_parser("keys", help="API key utilities")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser(
        "create", help="print a new API key, its config entry and whose documents it sees"
    )
    create.add_argument("--id", required=True, help="display id of the key")
    create.add_argument("--tenant", default="", help="tenant the key is bound to")
    create.add_argument(
        "--permissions",
        default="retrieve,execute",
        help="comma-separated: retrieve,rerank,execute,prepare,ingest,manage,operator,"
        "act_for,read_all_documents",
    )
    create.add_argument(
        "--principals",
        default="",
        help="comma-separated access principals the key reads as (group:ID,user:ID):"
        " documents whose access list names one of them",
    )
    mcp = sub.add_parser(
        "mcp", help="serve the MCP tools over stdio as a client of a running server"
    )
    add_connection_args(mcp)
    mcp.add_argument("--config", type=Path, help="the server's configuration (the tools' limits)")
    from groundwire.app.people_cli import add_commands

    add_commands(sub)
    args = parser.parse_args(args_in)
    if args.command == "mcp":
        from groundwire.app.mcp_cli import run as run_mcp

        return run_mcp(args)
    if getattr(args, "people_command", None) is not None:
        from groundwire.app.people_cli import run as run_people

        return run_people(args)
    if args.command == "keys":
        from groundwire.app.keys_cli import create_key

        return create_key(args.id, args.tenant, args.permissions, args.principals)
    if args.command in ("ingest", "reload"):
        from groundwire.app.client_options import OptionError, connection

        try:
            conn = connection(args)
        except OptionError as exc:
            print(f"groundwire {args.command}: {exc}", file=sys.stderr)
            return 2
        if args.command == "ingest":
            from groundwire.app.ingest_cli import run

            return run(conn, args.index)
        from groundwire.app.reload_cli import run as run_reload

        return run_reload(conn, args.validate_only)
    try:
        if args.command == "check-config":
            load_config(args.config)
            print("configuration is valid")
            return 0
        cfg = load_config(args.config) if args.config else default_config()
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    configure_logging(cfg.logging.level, cfg.logging.format)
    config_path = args.config.resolve() if args.config else None
    return asyncio.run(_serve(cfg, args.address, config_path, args.http_address))
