"""Build eval/answers/key_facts.jsonl: handbook questions with the evidence retrieval
gives them and the key fact an answer must state (or none: the question is off-topic).

Corpus: the Northwind Labs handbook the demo index ingests
(server/groundwire/app/demo/handbook, see app/defaults.py), chunked with the demo's
policy (800/100 characters, Markdown sections); a chunk's title is its document's
(`chunking.markdown_title`), as agents' context carries it. Evidence: the top 3 chunks of the
product's BM25 (domain/bm25.py, English stemming and stop words) for the question,
numbered 1-3 as an agent's context numbers them. For an answerable question whose
key fact is in none of those three chunks, the third is replaced by the best-ranked
chunk holding it (`forced` records it): the set measures the answerer, not retrieval.

    .venv/bin/python eval/answers/build_key_facts.py   # rewrites key_facts.jsonl
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from groundwire.domain import bm25
from groundwire.domain.analysis import ENGLISH_STOP_WORDS, Analyzer
from groundwire.domain.chunking import ChunkPolicy, chunk_text, markdown_title
from groundwire.domain.text import normalize_text

ROOT = Path(__file__).resolve().parents[2]
HANDBOOK = ROOT / "server" / "groundwire" / "app" / "demo" / "handbook"
OUT = Path(__file__).with_name("key_facts.jsonl")
TOP = 3

# (question, key fact). The key fact is a short string of the handbook that a
# correct answer contains (compared with whitespace and ** emphasis normalized).
ANSWERABLE: list[tuple[str, str]] = [
    ("How many weeks of leave does the primary caregiver receive?", "20 weeks"),
    ("How much parental leave does the secondary caregiver get?", "10 weeks"),
    ("How early before the due date can a birthing parent start leave?", "6 weeks before"),
    ("How many keep in touch days can I agree with my manager?", "up to 10 paid"),
    ("How many days of paid leave are there for adoption appointments?", "5 days of paid leave"),
    ("What are the hours during a phased return from parental leave?", "60 percent"),
    ("How much primary caregiver leave was there under POL-HR-009?", "from 16 to 20 weeks"),
    ("How long must a passphrase be?", "14 characters"),
    ("How long is an account locked after too many failed sign-in attempts?", "15 minutes"),
    ("Can I use SMS codes as a second factor?", "SMS codes are not accepted"),
    ("How long is the temporary access code from the Help Desk valid?", "24 hours"),
    ("Where can I verify my identity in person?", "Rotterdam or Lisbon office"),
    ("When is the IT Help Desk staffed?", "08:00 to 19:00 CET"),
    ("What is the hotel limit per night?", "EUR 180"),
    ("What is the meal limit for a full travel day?", "EUR 60"),
    ("What is the mileage rate for a private car?", "EUR 0.23 per kilometre"),
    ("How much is the one-off home office allowance?", "EUR 600"),
    ("Who must approve expense claims above EUR 2,500?", "Finance Director"),
    ("What is the deadline for submitting an expense claim?", "within 30 days"),
    ("What happens to claims submitted more than 90 days after the expense?", "rejected"),
    ("Above which amount do I need to keep a receipt?", "EUR 25"),
    ("When should I take the train instead of flying?", "under 6 hours"),
    ("How big is the yearly learning budget for courses and conferences?", "EUR 1,500"),
    ("What are the anchor days for hybrid employees?", "Tuesday and Thursday"),
    ("What are the core collaboration hours?", "10:00 to 15:00"),
    ("How long can I work from another country without approval?", "30 working days"),
    ("In which countries can remote employees be employed?", "Portugal, Spain, Germany"),
    ("How often must remote employees visit an office?", "at least twice a year"),
    ("What is the monthly internet allowance?", "EUR 40"),
    ("How quickly must I report a lost laptop?", "no later than 1 hour"),
    ("When must misdirected personal data be reported?", "within 4 hours"),
    ("Where do I forward a phishing email when the report button is missing?", "phishing@"),
    ("How fast does the Security Team acknowledge reports during working hours?", "30 minutes"),
    ("What is the refund window for customers?", "14 days"),
    ("How long does Edge Box shipping take to the rest of the European Union?", "3 to 5"),
    ("How long is the Edge Box warranty?", "2-year warranty"),
    ("Where do Edge Box appliances ship from?", "Venlo"),
    ("When does Customer Support answer chat and email?", "08:00 to 20:00 CET"),
    ("Within how many minutes must a SEV2 page be acknowledged?", "15 minutes"),
    ("When does the on-call rotation hand over?", "Mondays at 10:00 CET"),
    ("What allowance do on-call engineers receive?", "EUR 250 per week"),
    ("When is the postmortem draft due?", "5 working days"),
    ("How often are status updates sent during a SEV1?", "every 30 minutes"),
    ("What does error VPN-E42 mean?", "rejected the certificate"),
    ("How long are device certificates valid?", "12 months"),
    ("How long do I have to approve the VPN multi-factor prompt?", "60 seconds"),
    ("Which namespace holds the retrieval interfaces?", "Northwind.Search.Abstractions"),
    ("What does compiler error CS1503 mean?", "cannot be converted"),
    ("Which RRF k constant does hybrid search use?", "k = 60"),
    ("What chunk size does the retrieval index use?", "500 tokens"),
    ("How many approvals do changes to authentication need?", "Two approvals"),
    ("How many changed lines should a pull request stay under?", "400 changed lines"),
    ("How many people work at Northwind Labs?", "about 180 people"),
    ("When is the next full review of the handbook planned?", "January 2026"),
]

# Phrased as users ask, with fewer of the answer's own words (added after the first
# comparison of scorers on the questions above).
USER_PHRASED: list[tuple[str, str]] = [
    ("How many weeks of parental leave do I get?", "20 weeks"),
    ("How do I recover access to my account?", "self-service reset"),
    ("How much can I spend on a hotel in Paris?", "EUR 250"),
    ("Who approves my expense claim of 300 euros?", "approved by your manager"),
    ("When will my expense claim be paid?", "paid with that month's salary"),
    ("What should I do first if I opened a phishing attachment?", "Disconnect the device"),
    ("Which factors can I use for MFA?", "authenticator app and FIDO2"),
    ("What do I need to show for identity verification?", "government-issued photo ID"),
    ("Can contractors take parental leave?", "not covered by this policy"),
    ("What happens to my equity during parental leave?", "continues to vest"),
    ("Which gateway does the VPN use by default?", "vpn-ams.example.com"),
    ("What should I do when internal sites do not load on the VPN?", "Disconnect and reconnect"),
    ("How long does a refund take to reach the customer?", "5 to 10 working days"),
    ("Who decides when a code review disagreement cannot be resolved?", "tech lead"),
    ("How many approvals does a hotfix need during an incident?", "single\napproval"),
    ("Who is paged if the secondary on-call does not respond?", "engineering manager on duty"),
    ("What is the target first response time for chat?", "5 minutes for chat"),
    ("Where do the retrieval settings live?", "appsettings.json"),
    ("Can I fly premium economy?", "longer than 6 hours"),
]

# Off-topic questions an employee might ask: the handbook does not answer them, yet
# lexical retrieval still returns three chunks sharing some of their words.
UNANSWERABLE: list[str] = [
    "What is the dress code at the office?",
    "How do I book a meeting room?",
    "What percentage does the company match on pension contributions?",
    "How many days of sick leave do I get?",
    "Can I bring my dog to the office?",
    "What is the parking policy at the Rotterdam office?",
    "Who won the company football tournament?",
    "What is the price of a Northwind Cloud subscription?",
    "How do I install Python on my laptop?",
    "What is the guest Wi-Fi password?",
    "When is the annual salary review?",
    "How do I request a standing desk?",
    "What is the maximum file upload size in the product?",
    "Which programming language is the mobile app written in?",
    "How many vacation days do employees get per year?",
    "What is the bonus scheme for sales staff?",
    "What is the fire evacuation procedure?",
    "How much does the Edge Box weigh?",
    "How long are database backups retained?",
    "Which cloud provider hosts our production services?",
    "What is the referral bonus for recommending a candidate?",
]

ANALYZER = Analyzer(
    language="english", stemming=True, stop_words=ENGLISH_STOP_WORDS, stop_source="english"
)


def normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("**", "")).strip().lower()


def load_chunks() -> list[dict[str, str]]:
    chunks: list[dict[str, str]] = []
    policy = ChunkPolicy(size=800, overlap=100, markdown_sections=True)
    for path in sorted(HANDBOOK.rglob("*.md")):
        text = normalize_text(path.read_text(encoding="utf-8"))
        document = path.relative_to(HANDBOOK).as_posix()
        title = markdown_title(text)
        for chunk in chunk_text(text, policy, markdown=True):
            chunks.append(
                {
                    "document_id": document,
                    "chunk_id": chunk.chunk_id,
                    "title": title,
                    "text": chunk.text,
                }
            )
    return chunks


def rank(question: str, chunks: list[dict[str, str]]) -> list[int]:
    terms = [Counter(ANALYZER.terms(c["text"])) for c in chunks]
    lengths = [sum(t.values()) for t in terms]
    avgdl = bm25.average_length(sum(lengths), len(chunks))
    df: Counter[str] = Counter()
    for t in terms:
        df.update(t.keys())
    scores = [0.0] * len(chunks)
    for term in dict.fromkeys(ANALYZER.terms(question)):
        if not df[term]:
            continue
        weight = bm25.idf(len(chunks), df[term])
        for i, t in enumerate(terms):
            if t[term]:
                scores[i] += bm25.term_score(weight, float(t[term]), float(lengths[i]), avgdl)
    return sorted(range(len(chunks)), key=lambda i: (-scores[i], i))


def main() -> None:
    chunks = load_chunks()
    rows: list[dict[str, object]] = []
    cases: list[tuple[str, str | None, str]] = [
        *((q, f, "text-phrased") for q, f in ANSWERABLE),
        *((q, f, "user-phrased") for q, f in USER_PHRASED),
        *((q, None, "off-topic") for q in UNANSWERABLE),
    ]
    for k, (question, fact, group) in enumerate(cases, 1):
        order = rank(question, chunks)
        top = order[:TOP]
        forced = False
        if fact is not None:
            holding = [i for i in order if normalized(fact) in normalized(chunks[i]["text"])]
            if not holding:
                raise SystemExit(f"key fact {fact!r} is in no chunk")
            if not set(top) & set(holding):
                top = [*top[: TOP - 1], holding[0]]
                forced = True
        rows.append(
            {
                "id": f"kf-{k:03d}",
                "question": question,
                "group": group,
                "answerable": fact is not None,
                "key_fact": fact,
                "forced": forced,
                "evidence": [{"n": n, **chunks[i]} for n, i in enumerate(top, 1)],
            }
        )
    with OUT.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    forced_count = sum(1 for r in rows if r["forced"])
    answerable = len(ANSWERABLE) + len(USER_PHRASED)
    print(
        f"{len(rows)} questions ({answerable} answerable, {len(UNANSWERABLE)} not), "
        f"{forced_count} with the key-fact chunk forced into the top {TOP} -> {OUT}"
    )


if __name__ == "__main__":
    main()
