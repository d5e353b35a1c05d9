"""BEIR-format collections: `corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`.

The dataset version is a content hash (sha256) over the bytes of exactly the three
files an evaluation reads, so a result can say which judgments it was computed
against, and an index built from another version is detected (the data is versioned
together with the index and the retrieval settings).

Query metadata (BEIR's optional `metadata` object) can define slices: a field
whose value is a string, number or boolean (or a list of them) names the slice of
each query. Two derived fields always exist: `qrels.relevant` (how many judged
relevant documents a query has: "1", "2", "3+") and `query.length` (words:
"1-8", "9-16", "17+").
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DERIVED_SLICE_FIELDS",
    "Dataset",
    "DatasetError",
    "Document",
    "Query",
    "dataset_version",
    "load_beir",
    "load_queries",
    "load_slice_file",
    "slice_value",
]

DERIVED_SLICE_FIELDS = ("qrels.relevant", "query.length")


class DatasetError(ValueError):
    """A collection that cannot be read (missing file, bad JSON or TSV)."""


@dataclass(frozen=True, slots=True)
class Document:
    """One corpus entry."""

    id: str
    title: str
    text: str

    def content(self) -> str:
        """The text pushed to the index: title, blank line, text (either may be empty)."""
        title, text = self.title.strip(), self.text.strip()
        if title and text:
            return f"{title}\n\n{text}"
        return title or text


@dataclass(frozen=True, slots=True)
class Query:
    """One query with its optional BEIR metadata."""

    id: str
    text: str
    metadata: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Dataset:
    """A loaded collection. `qrels[query_id][doc_id]` is the graded judgment."""

    name: str
    split: str
    version: str
    corpus: tuple[Document, ...]
    queries: Mapping[str, Query]
    qrels: Mapping[str, Mapping[str, int]]

    def judged_queries(self) -> list[Query]:
        """Queries with at least one judgment in the split, in qrels file order
        (the order a run uses, so results are reproducible)."""
        return [self.queries[q] for q in self.qrels if q in self.queries]

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "split": self.split,
            "version": self.version,
            "documents": len(self.corpus),
            "queries": len(self.queries),
            "judged_queries": len(self.judged_queries()),
            "judgments": sum(len(v) for v in self.qrels.values()),
        }


def _files(root: Path, split: str) -> tuple[Path, Path, Path]:
    corpus = root / "corpus.jsonl"
    queries = root / "queries.jsonl"
    qrels = root / "qrels" / f"{split}.tsv"
    for p in (corpus, queries, qrels):
        if not p.is_file():
            raise DatasetError(f"missing {p.name} in the collection (split {split!r})")
    return corpus, queries, qrels


def dataset_version(root: Path, split: str) -> str:
    """`sha256:<hex>` over the three files' names, sizes and bytes."""
    digest = hashlib.sha256()
    for p in _files(root, split):
        data = p.read_bytes()
        digest.update(f"{p.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return "sha256:" + digest.hexdigest()


def _jsonl(path: Path) -> Iterator[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path.name}:{lineno}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or "_id" not in obj:
                raise DatasetError(f"{path.name}:{lineno}: expected an object with '_id'")
            yield obj


def _str(value: object) -> str:
    return "" if value is None else str(value)


def load_queries(path: Path) -> dict[str, Query]:
    """Read a BEIR `queries.jsonl`."""
    out: dict[str, Query] = {}
    for obj in _jsonl(path):
        meta = obj.get("metadata")
        out[_str(obj["_id"])] = Query(
            _str(obj["_id"]), _str(obj.get("text")), meta if isinstance(meta, dict) else {}
        )
    return out


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        for lineno, row in enumerate(reader, start=1):
            if not row or (lineno == 1 and row[0] == "query-id"):
                continue
            if len(row) < 3:
                raise DatasetError(f"{path.name}:{lineno}: expected query-id, corpus-id, score")
            try:
                score = int(float(row[2]))
            except ValueError:
                raise DatasetError(f"{path.name}:{lineno}: score is not a number") from None
            out.setdefault(row[0], {})[row[1]] = score
    return out


def load_beir(root: Path, split: str = "test", name: str | None = None) -> Dataset:
    """Load a BEIR collection folder. `name` defaults to the folder name."""
    root = Path(root)
    corpus_p, queries_p, qrels_p = _files(root, split)
    version = dataset_version(root, split)
    corpus = tuple(
        Document(_str(o["_id"]), _str(o.get("title")), _str(o.get("text")))
        for o in _jsonl(corpus_p)
    )
    return Dataset(
        name=name or root.resolve().name,
        split=split,
        version=version,
        corpus=corpus,
        queries=load_queries(queries_p),
        qrels=_qrels(qrels_p),
    )


def load_slice_file(path: Path) -> dict[str, str]:
    """A two-column TSV `query-id<TAB>slice` (a header row starting with
    `query-id` is skipped): slices kept outside the collection."""
    out: dict[str, str] = {}
    with Path(path).open(encoding="utf-8", newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh, delimiter="\t"), start=1):
            if not row or (lineno == 1 and row[0] == "query-id"):
                continue
            if len(row) < 2:
                raise DatasetError(f"{Path(path).name}:{lineno}: expected query-id and slice")
            out[row[0]] = row[1]
    return out


def _scalar(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def slice_value(
    query: Query, field_name: str, qrels: Mapping[str, Mapping[str, int]] | None = None
) -> str | None:
    """The slice of `query` by `field_name` (a dotted path into its metadata, or a
    derived field), or None when the query has no usable value."""
    if field_name == "qrels.relevant":
        if qrels is None:
            return None
        n = sum(1 for s in qrels.get(query.id, {}).values() if s > 0)
        return "3+" if n >= 3 else str(n)
    if field_name == "query.length":
        words = len(query.text.split())
        return "1-8" if words <= 8 else "9-16" if words <= 16 else "17+"
    value: object = query.metadata
    for part in field_name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    scalar = _scalar(value)
    if scalar is not None:
        return scalar
    if isinstance(value, Sequence) and not isinstance(value, str) and value:
        items = [_scalar(v) for v in value]
        if all(i is not None for i in items):
            return "|".join(sorted({i for i in items if i is not None}))
    return None
