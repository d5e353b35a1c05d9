"""Which sentence scorer makes the offline extractive model state the key fact, and
which coverage threshold makes it refuse off-topic evidence.

Reads eval/answers/key_facts.jsonl (built by eval/answers/build_key_facts.py:
handbook questions, the top-3 chunks lexical retrieval gives them, the key fact or
none for off-topic questions). For each scorer of providers/chat/sentences.py it
prints the share of answerable questions whose answer contains the key fact with no
refusal rule, then sweeps the coverage threshold and prints, per threshold, false
refusals (answerable questions refused), false answers (unanswerable questions
answered) and key-fact hits. Last, the model itself (OfflineExtractiveModel, its own
rule) is run on the set through its chat interface.

With `--beir DIR` it also runs the model on a BEIR collection's judged queries
(`--split`, first `--limit`), each with the top 5 documents of the product's BM25
(title + text, English stemming) as evidence, and prints how often it refuses when
a judged relevant document is in that context and when none is.

    .venv/bin/python bench/bench_extractive_answers.py [--set FILE] [--json]
    .venv/bin/python bench/bench_extractive_answers.py --beir ../shared/data/scifact --limit 300
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundwire.domain import bm25
from groundwire.domain.analysis import ENGLISH_STOP_WORDS, Analyzer
from groundwire.domain.context_format import ContextSource, render_context
from groundwire.domain.text import phrase_words
from groundwire.providers.chat.base import ChatMessage, ChatOptions
from groundwire.providers.chat.offline import NO_INFORMATION, OfflineExtractiveModel, answer
from groundwire.providers.chat.sentences import (
    MIN_COVERAGE,
    QUESTION_STOP_WORDS,
    Candidate,
    Scored,
    Scorer,
    candidates_of,
    choose,
    coverage,
    held_terms,
    question_terms,
    score_bm25,
    score_bm25_context,
    term_weights,
)

ROOT = Path(__file__).resolve().parents[1]


# -- the alternatives measured beside the model's scorer ----------------------------


def _fold(word: str) -> str:
    """A light plural folding so "days" matches "day" and "policies" "policy"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _words(text: str) -> set[str]:
    return {_fold(w) for w in phrase_words(text) if w not in QUESTION_STOP_WORDS}


def score_count(question: str, candidates: Sequence[Candidate]) -> Scored:
    """The number of distinct question words a sentence holds (`phrase_words` minus
    stop words, light plural folding); coverage is that count over the question's."""
    wanted = _words(question)
    counts = [float(len(wanted & _words(c.text))) for c in candidates]
    total = len(wanted) or 1
    return Scored(counts, [n / total for n in counts])


def score_idf(question: str, candidates: Sequence[Candidate]) -> Scored:
    """The idf (as in `score_bm25`) of the distinct question terms a sentence holds:
    the first version's count with each word weighing its rarity, no tf, no length."""
    wanted = question_terms(question)
    bags = [held_terms(c.text, wanted)[0] for c in candidates]
    weights = term_weights(wanted, bags)
    scores = [sum(weights[t] for t in wanted if bag[t]) for bag in bags]
    return Scored(scores, [coverage(wanted, bag, weights) for bag in bags])


def score_hybrid(question: str, candidates: Sequence[Candidate]) -> Scored:
    """BM25 scaled by (1 + coverage) and by a proximity factor: the question terms
    found close together (the shortest window holding all matched terms, in words)."""
    base = score_bm25(question, candidates)
    wanted = question_terms(question)
    scores: list[float] = []
    for candidate, score, share in zip(candidates, base.scores, base.coverage, strict=True):
        words = held_terms(candidate.text, wanted)[1]
        positions = [i for i, w in enumerate(words) if w]
        matched = len({words[i] for i in positions})
        span = _shortest_window(words, positions, matched)
        proximity = matched / span if span else 0.0
        scores.append(score * (1.0 + share) * (1.0 + 0.5 * proximity))
    return Scored(scores, base.coverage)


def _shortest_window(words: list[str], positions: list[int], matched: int) -> int:
    if matched == 0:
        return 0
    best = math.inf
    seen: Counter[str] = Counter()
    left = 0
    for at in positions:
        seen[words[at]] += 1
        while len(seen) == matched:
            best = min(best, at - positions[left] + 1)
            first = words[positions[left]]
            seen[first] -= 1
            if not seen[first]:
                del seen[first]
            left += 1
    return int(best)


SCORERS: dict[str, Scorer] = {
    "count": score_count,
    "idf": score_idf,
    "bm25": score_bm25,
    "bm25-context": score_bm25_context,
    "hybrid": score_hybrid,
}


DEFAULT_SET = ROOT / "eval" / "answers" / "key_facts.jsonl"
THRESHOLDS = [round(0.05 * k, 2) for k in range(0, 17)]


@dataclass(frozen=True)
class Case:
    question: str
    key_fact: str | None
    sources: list[ContextSource]
    group: str = ""


def normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("**", "")).strip().lower()


def load(path: Path) -> list[Case]:
    cases: list[Case] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        sources = [
            ContextSource(
                e["n"],
                e.get("document_id", ""),
                e.get("chunk_id", ""),
                e.get("title", ""),
                e["text"],
            )
            for e in row["evidence"]
        ]
        cases.append(Case(row["question"], row["key_fact"], sources, row.get("group", "")))
    return cases


def candidates(sources: list[ContextSource]) -> list[Candidate]:
    return candidates_of([(s.number, s.title, s.text) for s in sources])


def measure(cases: list[Case], scorer: str, threshold: float) -> dict[str, float]:
    answerable = [c for c in cases if c.key_fact is not None]
    other = [c for c in cases if c.key_fact is None]
    hits = refused = answered = 0
    for case in cases:
        chosen = choose(
            case.question,
            candidates(case.sources),
            [s.text for s in case.sources],
            SCORERS[scorer],
            min_coverage=threshold,
        )
        text = normalized(" ".join(c.text for c in chosen))
        if case.key_fact is None:
            answered += bool(chosen)
        elif not chosen:
            refused += 1
        elif normalized(case.key_fact) in text:
            hits += 1
    return {
        "key_fact_share": hits / len(answerable) if answerable else 0.0,
        "false_refusals": refused / len(answerable) if answerable else 0.0,
        "false_answers": answered / len(other) if other else 0.0,
        "correct": (hits + len(other) - answered) / len(cases),
    }


async def model_run(cases: list[Case]) -> dict[str, float]:
    model = OfflineExtractiveModel()
    answerable = [c for c in cases if c.key_fact is not None]
    other = [c for c in cases if c.key_fact is None]
    hits = refused = answered = 0
    for case in cases:
        messages = [
            ChatMessage("system", "Answer from the sources only."),
            ChatMessage("user", render_context(case.sources)),
            ChatMessage("user", case.question),
        ]
        content = (await model.complete(messages, [], ChatOptions())).content
        if case.key_fact is None:
            answered += content != NO_INFORMATION
        elif content == NO_INFORMATION:
            refused += 1
        elif normalized(case.key_fact) in normalized(content):
            hits += 1
    return {
        "key_fact_share": hits / len(answerable) if answerable else 0.0,
        "false_refusals": refused / len(answerable) if answerable else 0.0,
        "false_answers": answered / len(other) if other else 0.0,
        "correct": (hits + len(other) - answered) / len(cases),
    }


def beir_refusals(directory: Path, split: str, limit: int) -> dict[str, int]:
    """Model refusals on a BEIR collection with lexical top-5 evidence (see the
    module docstring)."""
    analyzer = Analyzer("english", True, ENGLISH_STOP_WORDS, "english")
    docs = [json.loads(line) for line in (directory / "corpus.jsonl").open(encoding="utf-8")]
    bags = [Counter(analyzer.terms(f"{d.get('title', '')}\n\n{d['text']}")) for d in docs]
    lengths = [float(sum(b.values())) for b in bags]
    avgdl = bm25.average_length(int(sum(lengths)), len(bags))
    postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for i, bag in enumerate(bags):
        for term, tf in bag.items():
            postings[term].append((i, tf))
    relevant: dict[str, set[str]] = defaultdict(set)
    lines = (directory / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        query_id, doc_id, score = line.split("\t")[:3]
        if int(score) > 0:
            relevant[query_id].add(doc_id)
    queries = [json.loads(line) for line in (directory / "queries.jsonl").open(encoding="utf-8")]
    queries = [q for q in queries if q["_id"] in relevant][:limit]
    counts = {"in_context": 0, "in_context_refused": 0, "missed": 0, "missed_refused": 0}
    for query in queries:
        scores: dict[int, float] = defaultdict(float)
        for term in dict.fromkeys(analyzer.terms(query["text"])):
            posting = postings.get(term, [])
            weight = bm25.idf(len(docs), len(posting)) if posting else 0.0
            for i, tf in posting:
                scores[i] += bm25.term_score(weight, float(tf), lengths[i], avgdl)
        top = sorted(scores, key=lambda i: (-scores[i], i))[:5]
        sources = [
            ContextSource(n, docs[i]["_id"], "", docs[i].get("title", ""), docs[i]["text"])
            for n, i in enumerate(top, 1)
        ]
        messages = [
            ChatMessage("user", render_context(sources)),
            ChatMessage("user", query["text"]),
        ]
        refused = answer(messages, []).content == NO_INFORMATION
        key = (
            "in_context" if any(docs[i]["_id"] in relevant[query["_id"]] for i in top) else "missed"
        )
        counts[key] += 1
        counts[f"{key}_refused"] += refused
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_SET)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--beir", type=Path, help="also run a BEIR collection (see above)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, default=300)
    args = parser.parse_args()
    cases = load(args.set)
    n_ans = sum(c.key_fact is not None for c in cases)
    report: dict[str, Any] = {
        "set": str(args.set),
        "questions": len(cases),
        "answerable": n_ans,
        "unanswerable": len(cases) - n_ans,
        "scorers": {},
    }
    for name in SCORERS:
        sweep = {t: measure(cases, name, t) for t in THRESHOLDS}
        # The calibrated threshold: most questions handled correctly (key fact stated
        # or off-topic refused), ties to the lower threshold (fewer false refusals).
        best = max(THRESHOLDS, key=lambda t: (sweep[t]["correct"], -t))
        report["scorers"][name] = {
            "no_refusal_rule": measure(cases, name, 0.0),
            "best_threshold": best,
            "at_best": sweep[best],
            "at_model_threshold": sweep.get(MIN_COVERAGE) or measure(cases, name, MIN_COVERAGE),
            "sweep": {str(t): v for t, v in sweep.items()},
        }
    report["model"] = asyncio.run(model_run(cases))
    report["model_threshold"] = MIN_COVERAGE
    if args.beir:
        report["beir"] = beir_refusals(args.beir, args.split, args.limit)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{args.set.relative_to(ROOT) if args.set.is_relative_to(ROOT) else args.set}: "
        f"{len(cases)} questions, {n_ans} answerable, {len(cases) - n_ans} off-topic"
    )
    groups = sorted({c.group for c in cases if c.key_fact is not None and c.group})
    print("\nkey fact stated (answerable questions), no refusal rule (coverage > 0):")
    print(f"  {'scorer':13s} {'all':>6s}" + "".join(f" {g:>13s}" for g in groups))
    for name, r in report["scorers"].items():
        parts = [measure([c for c in cases if c.group == g], name, 0.0) for g in groups]
        print(
            f"  {name:13s} {r['no_refusal_rule']['key_fact_share']:6.3f}"
            + "".join(f" {p['key_fact_share']:13.3f}" for p in parts)
        )
    print(
        "\nthreshold sweep on the coverage of the question by the best sentence's source "
        "(key fact / false refusal / false answer / correct):"
    )
    header = "  thr   " + "".join(f"{name:>30s}" for name in SCORERS)
    print(header)
    for t in THRESHOLDS:
        cells = []
        for name in SCORERS:
            m = report["scorers"][name]["sweep"][str(t)]
            cells.append(
                f"{m['key_fact_share']:.3f}/{m['false_refusals']:.3f}/"
                f"{m['false_answers']:.3f}/{m['correct']:.3f}"
            )
        print(f"  {t:4.2f}  " + "".join(f"{c:>30s}" for c in cells))
    print("\nbest threshold per scorer (most questions correct):")
    for name, r in report["scorers"].items():
        m = r["at_best"]
        print(
            f"  {name:13s} >= {r['best_threshold']:.2f}: key fact {m['key_fact_share']:.3f}, "
            f"false refusals {m['false_refusals']:.3f}, false answers {m['false_answers']:.3f}, "
            f"correct {m['correct']:.3f}"
        )
    m = report["model"]
    print(
        f"\nOfflineExtractiveModel (threshold {MIN_COVERAGE}): key fact {m['key_fact_share']:.3f}, "
        f"false refusals {m['false_refusals']:.3f}, false answers {m['false_answers']:.3f}, "
        f"correct {m['correct']:.3f}"
    )

    if args.beir:
        b = report["beir"]
        print(
            f"\n{args.beir.name} ({args.split}, {b['in_context'] + b['missed']} judged queries, "
            f"lexical top 5): refused {b['in_context_refused']}/{b['in_context']} with a "
            f"relevant document in context, {b['missed_refused']}/{b['missed']} without"
        )


if __name__ == "__main__":
    main()
