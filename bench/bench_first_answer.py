"""Time to the first answer, as a newcomer meets it: clone -> `make setup` -> a
configuration over their own folder -> `groundwire serve` -> `groundwire ingest` ->
the first grounded answer (issue 28 item 8: <= 120 s on a quiet 2-core machine
with a warm package cache, ingestion of ~600 chunks included).

    python bench/bench_first_answer.py [--repo .] [--keep DIR] [--skip-setup]

The folder holds 34 files of the formats a team's folder has, made from text that
ships with the repository: the manual's pages (docs/**/*.md), the demo handbook
(Markdown), and the same text as HTML, reStructuredText, CSV, plain text, a PDF
(fpdf2, a dev dependency), a gzip-compressed Markdown file and an extensionless
README. The configuration is the README walkthrough's (directory source, local
MiniLM, offline extractive model, a grounded agent). Each phase is timed with the
clone's own `.venv` (so a cold `make setup` shows what pip costs with the cache this
machine has: run once before to warm it). Then `bench/bench_embeddings.py` of the
clone says how close the embedder runs to bare onnxruntime, which is where
ingestion's time goes.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "How many weeks of parental leave do I get?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 1800) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout + done.stderr


def make_folder(repo: Path, folder: Path) -> int:
    """34 files from the repository's own text (see module docstring)."""
    folder.mkdir(parents=True)
    pages = sorted((repo / "docs").rglob("*.md"))
    handbook = sorted((repo / "server/groundwire/app/demo/handbook").rglob("*.md"))
    files: list[tuple[str, bytes]] = []
    for page in pages[:15]:
        files.append((f"manual/{page.relative_to(repo / 'docs')}", page.read_bytes()))
    for page in handbook:
        files.append((f"handbook/{page.relative_to(page.parents[1])}", page.read_bytes()))
    texts = [p.read_text() for p in handbook]
    body = texts[0]
    paragraphs = [p for p in re.split(r"\n\s*\n", "\n\n".join(texts)) if len(p) > 80]
    html = "".join(f"<p>{p}</p>" for p in paragraphs[:12])
    files.append(("web/policies.html", f"<html><title>Policies</title>{html}</html>".encode()))
    files.append(("notes/policies.rst", ("Policies\n========\n\n" + body).encode()))
    rows = "\n".join(f'{i},"{p[:200].replace(chr(34), chr(39))}"' for i, p in enumerate(paragraphs))
    files.append(("data/paragraphs.csv", ("id,text\n" + rows).encode()))
    files.append(("notes/plain.txt", "\n\n".join(paragraphs[12:30]).encode()))
    files.append(("README", b"Team folder: policies, support runbooks and the manual.\n"))
    files.append(("archive/handbook.md.gz", gzip.compress(texts[1].encode())))
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for p in paragraphs[30:60]:
        if pdf.page_no() == 0 or pdf.get_y() > 250:
            pdf.add_page()
        text = p.encode("latin-1", "replace").decode("latin-1")
        pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
    files.append(("reports/policies.pdf", bytes(pdf.output())))
    files = files[:34]
    for name, data in files:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return len(files)


CONFIG = """[server]
address = "127.0.0.1:{port}"

[auth]
mode = "disabled"

[embedders.minilm]
kind = "local-onnx"

[indexes.docs]
embedder = "minilm"
sources = [{{ kind = "directory", path = "my-docs" }}]

[models.offline]
kind = "offline"

[agents.docs-assistant]
name = "Docs Assistant"
model = "offline/extractive-v1"
[agents.docs-assistant.rag]
index = "docs"
mode = "grounded"
no_context_behavior = "return_not_found"
acceptance = {{ minimum_relevance = 0.65 }}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default=str(ROOT), help="the repository to clone")
    ap.add_argument("--keep", default=None, help="work here and keep it (default: a temp dir)")
    ap.add_argument("--skip-setup", action="store_true", help="reuse --keep's clone and venv")
    args = ap.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gw-first-"))
    work.mkdir(parents=True, exist_ok=True)
    clone = work / "groundwire"
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"{os.cpu_count()} cores, loadavg {' '.join(load)} at start; work in {work}")
    phases: list[tuple[str, float]] = []
    t0 = time.perf_counter()
    if not args.skip_setup:
        shutil.rmtree(clone, ignore_errors=True)
        run(["git", "clone", "-q", args.repo, str(clone)], work, env)
        phases.append(("git clone", time.perf_counter() - t0))
        t = time.perf_counter()
        run(["make", "setup"], clone, env)
        phases.append(("make setup (warm pip cache)", time.perf_counter() - t))
    bin_dir = clone / ".venv" / "bin"
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    own = work / "mine"
    shutil.rmtree(own, ignore_errors=True)
    own.mkdir(parents=True)
    n_files = make_folder(clone, own / "my-docs")
    port = free_port()
    (own / "groundwire.toml").write_text(CONFIG.format(port=port))
    address = f"127.0.0.1:{port}"
    t = time.perf_counter()
    server = subprocess.Popen(
        [str(bin_dir / "groundwire"), "serve", "--config", "groundwire.toml"],
        cwd=own,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        probe = [str(bin_dir / "grpcurl"), "-plaintext", address, "grpc.health.v1.Health/Check"]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            got = subprocess.run(probe, capture_output=True, text=True, check=False)
            if '"SERVING"' in got.stdout:
                break
            if server.poll() is not None:
                sys.exit("groundwire serve exited")
            time.sleep(0.1)
        phases.append(("serve: start to SERVING", time.perf_counter() - t))
        t = time.perf_counter()
        summary = run(["groundwire", "ingest", "docs", "--address", address], own, env)
        phases.append(("ingest the folder", time.perf_counter() - t))
        t = time.perf_counter()
        answer = run(
            ["groundwire", "ask", "docs-assistant", QUESTION, "--address", address], own, env
        )
        phases.append(("first answer (ask)", time.perf_counter() - t))
    finally:
        server.terminate()
        server.wait(timeout=60)
    total = sum(s for _, s in phases)
    line = next((x for x in summary.splitlines() if x.startswith(("SUCCEEDED", "FAILED"))), "")
    print(f"\nfolder: {n_files} files; ingest: {line}")
    print(f"answer: {answer.strip().splitlines()[0][:160] if answer.strip() else '(none)'}")
    for name, seconds in phases:
        print(f"  {name:32s} {seconds:7.1f} s")
    print(f"  {'total':32s} {total:7.1f} s  (target <= 120 s on a quiet 2-core machine)")
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"loadavg {' '.join(load)} at end")
    print("\nembedder vs bare onnxruntime (the clone's bench/bench_embeddings.py):")
    out = run(
        [str(bin_dir / "python"), "bench/bench_embeddings.py", "--passages", "600"], clone, env
    )
    print(out.strip())
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
