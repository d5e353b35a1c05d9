"""Pushing a large PDF with `groundwire push` and its defaults against a local server.

Generates a PDF of many pages of text with fpdf2 (a dev dependency; uncompressed
page streams, so the file reaches the asked size with text alone), starts
`groundwire serve` on loopback (memory store, the hashing embedder, one push-only
index `docs` whose `max_file_bytes` is 64 MiB, every other setting at its default
unless `--parser-cpu-seconds` raises the parser workers' CPU and time bounds), runs
`groundwire push docs FILE --json` with the CLI's defaults (a file of 1 MiB or
more streams to UploadDocument in 1 MiB parts; deadline per call) and prints, for
each size: the file's size, the push's wall time and the outcome (the CLI's exit
status and its summary). With `--ingest`, each file is then also ingested from a
directory source (index `files`, `max_file_bytes` 64 MiB) with
`groundwire ingest files`, timed with its outcome.

    .venv/bin/python bench/bench_push_large.py [--mb 30 3] [--ingest] [--parser-cpu-seconds 120]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LINE = (
    "Quarterly operations report: the committee reviewed staffing, budgets, "
    "procurement and the incident log for line {n}."
)


def make_pdf(path: Path, megabytes: float) -> None:
    """Pages of text until the file is at least `megabytes` MB."""
    from fpdf import FPDF

    target = int(megabytes * 1_000_000)
    pdf = FPDF()
    pdf.set_compression(False)
    pdf.set_font("Helvetica", size=8)
    n = 0
    # About 9 KB a page uncompressed: write pages, then check the size once.
    pages = max(1, target // 9_000)
    for _ in range(pages):
        pdf.add_page()
        for _ in range(60):
            pdf.cell(0, 4, LINE.format(n=n), new_x="LMARGIN", new_y="NEXT")
            n += 1
    data = bytes(pdf.output())
    path.write_bytes(data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[30.0], help="PDF sizes in MB")
    ap.add_argument(
        "--ingest", action="store_true", help="then ingest each from a directory source"
    )
    ap.add_argument(
        "--parser-cpu-seconds",
        type=float,
        help="the server's [ingestion] parser_cpu_seconds and parser_timeout_seconds"
        " (default: the server's defaults, 20 and 60)",
    )
    args = ap.parse_args()
    parsing = ""
    if args.parser_cpu_seconds:
        cpu = args.parser_cpu_seconds
        parsing = f"[ingestion]\nparser_cpu_seconds = {cpu}\nparser_timeout_seconds = {cpu * 3}\n"

    from groundwire.app.config import ServerConfig
    from groundwire.app.people_cli import PUSH_TIMEOUT_S
    from groundwire.app.push_cli import PUSH_MAX_BYTES
    from tests.support.servers import ServerProcess, free_port, toml_config

    max_message = ServerConfig().max_message_bytes
    groundwire = Path(sys.executable).parent / "groundwire"
    with tempfile.TemporaryDirectory() as raw:
        tmp = Path(raw)
        files = tmp / "files"
        files.mkdir()
        cfg = toml_config(
            tmp,
            f"""
[auth]
mode = "disabled"

[logging]
level = "WARNING"

[embedders.hash]
kind = "hashing"

{parsing}
[indexes.docs]
embedder = "hash"
ingestion = {{ max_file_bytes = {64 * 1024 * 1024} }}

[indexes.files]
embedder = "hash"
sources = [{{ kind = "directory", path = "{files}", glob = "*.pdf" }}]
ingestion = {{ max_file_bytes = {64 * 1024 * 1024} }}
""",
        )
        server = ServerProcess(cfg, free_port(), tmp / "server.log")
        server.start(timeout=120)
        try:
            print(
                f"server: max_message_bytes {max_message / 2**20:g} MiB (default);"
                f" CLI: UpsertDocuments bound {PUSH_MAX_BYTES / 2**20:g} MiB per call (files of"
                f" 1 MiB or more stream to UploadDocument), deadline {PUSH_TIMEOUT_S:g} s per"
                " call (default); index docs: max_file_bytes 64 MiB"
            )
            for mb in args.mb:
                pdf = tmp / f"report-{mb:g}mb.pdf"
                t0 = time.perf_counter()
                make_pdf(pdf, mb)
                made = time.perf_counter() - t0
                size = pdf.stat().st_size
                cmd = [str(groundwire), "push", "docs", str(pdf), "--json"]
                cmd += ["--address", server.target]
                t0 = time.perf_counter()
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                took = time.perf_counter() - t0
                try:
                    summary = json.loads(done.stdout)
                except json.JSONDecodeError:
                    summary = {"stdout": done.stdout.strip(), "stderr": done.stderr.strip()}
                print(
                    f"{size / 1e6:.1f} MB PDF (made in {made:.1f} s): push {took:.2f} s,"
                    f" exit {done.returncode}"
                )
                print("  " + json.dumps(summary))
                if args.ingest:
                    for old in files.iterdir():
                        old.unlink()
                    pdf.rename(files / pdf.name)
                    cmd = [str(groundwire), "ingest", "files", "--address", server.target]
                    t0 = time.perf_counter()
                    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                    took = time.perf_counter() - t0
                    print(f"  ingest from a directory source: {took:.2f} s, exit {done.returncode}")
                    print("  " + " | ".join(done.stdout.strip().splitlines()[:4]))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
