"""Block postings against the row postings they replace, in one invocation (issue 45).

    nice -n 10 .venv/bin/python bench/bench_blockmax_ab.py [--chunks 100000]
        [--queries 300] [--baseline-commit f05c1e9] [--out bench/results/blockmax_ab]

Runs bench/bench_million.py (text only: `--no-vectors`, so the load is the bulk
load without the HNSW build) twice on the same seeded corpus and queries: first
with the code of `--baseline-commit` (`git archive` of that commit into a temporary
folder, run with its own server/ and bench/ first on the path: row postings,
MaxScore and impact rounds), then with this checkout (block postings, block-max
MaxScore). Each run starts its own embedded PostgreSQL on a fresh data directory.
Then prints the two tables side by side with the ratios (new / old) of the figures
issue 45 targets: whole-mix lexical p50 and p99, common-word p50, filtered 10% p99,
bulk chunks/s without HNSW, postings bytes a chunk; and whether the two runs'
lexical results (document, chunk and repr of the score for every hit of every
query) are byte-identical. Load average before and after each run is printed: on
a shared machine only the ratios mean something.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(tree: Path, args: argparse.Namespace, results: Path, log: Path) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "server"), str(tree)])
    cmd = [
        sys.executable,
        str(tree / "bench" / "bench_million.py"),
        "--chunks",
        str(args.chunks),
        "--queries",
        str(args.queries),
        "--no-vectors",
        "--results",
        str(results),
    ]
    print(f"load average before: {os.getloadavg()}", flush=True)
    t = time.perf_counter()
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=False)
    log.write_text(out.stdout + out.stderr)
    print(f"  {tree}: {time.perf_counter() - t:.0f}s, exit {out.returncode}", flush=True)
    print(f"load average after: {os.getloadavg()}", flush=True)
    if out.returncode != 0:
        raise SystemExit(f"run failed, see {log}")
    return out.stdout


def figure(text: str, label: str, index: int = 0) -> float:
    """The index-th number of the value on the table line starting with `label`
    (after the query count "[n]" when there is one)."""
    for line in text.splitlines():
        if line.strip().startswith(label.strip()):
            value = line.strip()[len(label.strip()) :]
            value = value.split("]", 1)[-1]
            numbers = re.findall(r"\d[\d,]*(?:\.\d+)?", value)
            return float(numbers[index].replace(",", ""))
    return float("nan")


def postings_bytes(text: str) -> float:
    """Bytes a chunk of the postings tables (row partitions or blocks)."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(
            r"\s*table (gw_postings\S*|gw_posting_blocks) \(total\).*\(([\d,]+) B/chunk\)", line
        )
        if m:
            total += float(m.group(2).replace(",", ""))
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--baseline-commit", default="f05c1e9")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "blockmax_ab"))
    parser.add_argument("--summarize", action="store_true", help="only re-read the logs of --out")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        summarize(args, out, Path(f"{out}.old.log").read_text(), Path(f"{out}.new.log").read_text())
        return
    with tempfile.TemporaryDirectory(prefix="gw-baseline-") as tmp:
        base = Path(tmp)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline_commit, "server", "bench"],
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        old = run(base, args, Path(f"{out}.old.results"), Path(f"{out}.old.log"))
    new = run(ROOT, args, Path(f"{out}.new.results"), Path(f"{out}.new.log"))
    summarize(args, out, old, new)


def summarize(args: argparse.Namespace, out: Path, old: str, new: str) -> None:
    """The side-by-side figures, printed and written to <out>.summary."""
    same = Path(f"{out}.old.results").read_bytes() == Path(f"{out}.new.results").read_bytes()
    rows = [
        ("lexical whole mix p50 (ms)", "lexical all p50", 0),
        ("lexical whole mix p99 (ms)", "lexical all p50", 1),
        ("lexical whole mix server CPU (ms/query)", "lexical all p50", 3),
        ("lexical common-word p50 (ms)", "lexical common p50", 0),
        ("lexical common-word server CPU (ms/query)", "lexical common p50", 3),
        ("lexical filtered 10% p50 (ms)", "lexical filtered 10% p50", 0),
        ("lexical filtered 10% p99 (ms)", "lexical filtered 10% p50", 1),
        ("bulk load without HNSW (chunks/s)", "  load without HNSW build (chunks/s)", 0),
    ]
    lines = [f"{'figure':<44} {'old':>10} {'new':>10} {'new/old':>8}"]
    for label, key, i in rows:
        a, b = figure(old, key, i), figure(new, key, i)
        lines.append(f"{label:<44} {a:>10.1f} {b:>10.1f} {b / a:>8.3f}")
    a, b = postings_bytes(old), postings_bytes(new)
    lines.append(f"{'postings (B/chunk)':<44} {a:>10.0f} {b:>10.0f} {b / a:>8.3f}")
    lines.append(f"lexical results byte-identical (all {args.queries} queries): {same}")
    text = "\n".join(lines)
    print(text)
    Path(f"{out}.summary").write_text(text + "\n")


if __name__ == "__main__":
    main()
