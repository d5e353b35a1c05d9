"""HTML anchors (domain/anchors.py, html_text.py): the loader records where each
element id's paragraph starts in the normalized text, and a citation names the
nearest anchor at or before the text it cites."""

from __future__ import annotations

import pytest

from groundwire.domain.anchors import (
    ANCHORS_KEY,
    MAX_ANCHORS_CHARS,
    anchor_at,
    encode_anchors,
    parse_anchors,
)
from groundwire.ingestion.html_text import ANCHOR_END, ANCHOR_MARK, html_to_text
from groundwire.ingestion.loaders import DocumentFormat, LoadedDocument, load_bytes

pytestmark = pytest.mark.timeout(10)

PAGE = """<!doctype html><html><head><title>Guide</title></head><body>
<nav id="site-nav"><a href="/">Home</a></nav>
<main>
  <h1 id="top">Guide</h1>
  <p>Intro text about the product.</p>
  <section id="install">
    <h2 id="install-heading">Install  it</h2>
    <p>Run the installer. Then <a id="inline-ref" href="#x">restart</a> the host.</p>
  </section>
  <h2 id="faq:1,a b">FAQ</h2>
  <p>Caf\u0065\u0301 questions are answered here.</p>
  <div id="empty"></div>
  <p>Last paragraph.</p>
</main></body></html>"""


def load(html: str) -> LoadedDocument:
    doc = load_bytes(
        "guide.html", "guide.html", html.encode(), DocumentFormat.HTML, max_bytes=1 << 20
    )
    assert isinstance(doc, LoadedDocument)
    return doc


def test_each_id_marks_the_start_of_its_paragraph_in_the_stored_text() -> None:
    doc = load(PAGE)
    # The text is exactly what extraction without anchors gives.
    assert doc.text == html_to_text(PAGE)[0].replace("e\u0301", "\u00e9")
    assert ANCHOR_MARK not in doc.text and ANCHOR_END not in doc.text
    anchors = parse_anchors(doc.metadata[ANCHORS_KEY])
    ids = [a for _, a in anchors]
    # Chrome (the nav) is dropped with its id; an inline id names its paragraph.
    assert ids == ["top", "install", "install-heading", "inline-ref", "faq:1,a b", "empty"]
    where = dict((a, o) for o, a in anchors)
    assert doc.text[where["top"] :].startswith("Guide")
    assert doc.text[where["install"] :].startswith("Install it")
    assert where["install"] == where["install-heading"]
    assert doc.text[where["inline-ref"] :].startswith("Run the installer.")
    # Offsets are in the normalized (NFC) text: the combining accent was composed.
    assert doc.text[where["faq:1,a b"] :].startswith("FAQ")
    # An element without text names the next paragraph.
    assert doc.text[where["empty"] :].startswith("Last paragraph.")
    # A citation of "restart the host" links to the nearest anchor before it.
    restart = doc.text.index("restart the host")
    assert anchor_at(doc.metadata, restart) == "inline-ref"
    assert anchor_at(doc.metadata, doc.text.index("Caf")) == "faq:1,a b"
    assert anchor_at(doc.metadata, 0) == "top"


def test_a_documents_own_mark_characters_are_text_not_anchors() -> None:
    hostile = f"<main><p id='a'>x</p><p>y {ANCHOR_MARK}0{ANCHOR_END} z</p></main>"
    doc = load(hostile)
    assert doc.text == "x\n\ny 0 z"
    assert parse_anchors(doc.metadata[ANCHORS_KEY]) == [(0, "a")]


def test_a_page_without_ids_records_nothing_and_a_supplied_record_is_replaced() -> None:
    doc = load("<p>Plain page.</p>")
    assert ANCHORS_KEY not in doc.metadata
    forged = load_bytes(
        "p.html",
        "p.html",
        b"<p>Plain page.</p>",
        DocumentFormat.HTML,
        max_bytes=1 << 20,
        metadata={ANCHORS_KEY: "0:evil"},
    )
    assert isinstance(forged, LoadedDocument) and ANCHORS_KEY not in forged.metadata


def test_the_record_is_bounded_and_parsing_is_strict() -> None:
    many = [(i * 10, f"section-{i}") for i in range(5_000)]
    record = encode_anchors(many)
    assert record is not None and len(record) <= MAX_ANCHORS_CHARS
    kept = parse_anchors(record)
    assert kept == many[: len(kept)] and len(kept) > 100  # the first ones kept
    assert encode_anchors([(0, "x" * 500)]) is None  # an id too long for a link
    assert parse_anchors("5:a,3:b") == []  # offsets go forward
    assert parse_anchors("x:a") == parse_anchors("1:") == parse_anchors("1") == []
    assert anchor_at({ANCHORS_KEY: "10:a,20:b"}, 5) is None
    assert anchor_at({ANCHORS_KEY: "10:a,20:b"}, 20) == "b"
    assert anchor_at({}, 5) is None
