"""PDF pages: the loader records where each page's text starts (document
metadata, domain/pages.py) and a span maps to the pages it starts and ends on."""

from __future__ import annotations

from groundwire.domain.pages import (
    MAX_PAGE_STARTS_CHARS,
    PAGE_STARTS_KEY,
    encode_page_starts,
    page_range,
    parse_page_starts,
)
from groundwire.ingestion.loaders import DocumentFormat, LoadedDocument, load_bytes
from groundwire.ingestion.pdf_text import PAGE_MARK, pdf_text, take_page_marks
from tests.support.pdfs import assemble_pdf


def paged_pdf(pages: list[list[str]]) -> bytes:
    """A PDF with one page per entry, each line drawn 20 points below the last
    (an empty list is a page without text); hand-assembled with a valid xref."""
    count = len(pages)
    font = 3 + 2 * count
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{3 + 2 * i} 0 R".encode() for i in range(count))
        + f"] /Count {count} >>".encode(),
    ]
    for i, lines in enumerate(pages):
        ops = " ".join(f"1 0 0 1 72 {720 - 20 * k} Tm ({line}) Tj" for k, line in enumerate(lines))
        stream = f"BT /F1 12 Tf {ops} ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R"
            f" /Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(
            b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream"
        )
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return assemble_pdf(objects)


PAGES = [
    ["Travel policy overview.", "Flights need approval."],
    [],
    ["Hotels are capped at 150 euros per night."],
    ["Meals are reimbursed with receipts.", "Taxis are allowed after 22:00."],
]


def load(data: bytes, metadata: dict[str, str] | None = None) -> LoadedDocument:
    doc = load_bytes(
        "travel.pdf", "s", data, DocumentFormat.PDF, max_bytes=100_000, metadata=metadata
    )
    assert isinstance(doc, LoadedDocument), doc
    return doc


def test_the_loader_records_where_each_page_starts() -> None:
    doc = load(paged_pdf(PAGES))
    starts = parse_page_starts(doc.metadata[PAGE_STARTS_KEY])
    # Page 2 has no text, so it starts nowhere; the others start where their text does.
    assert [p for p, _ in starts] == [1, 3, 4]
    assert starts[0][1] == 0
    assert doc.text[starts[1][1] :].startswith("Hotels are capped")
    assert doc.text[starts[2][1] :].startswith("Meals are reimbursed")
    assert PAGE_MARK not in doc.text
    # The text is what it was before pages were recorded.
    plain = pdf_text(paged_pdf(PAGES))
    assert isinstance(plain, tuple) and PAGE_MARK not in plain[0]
    assert plain[0] == doc.text


def test_a_span_maps_to_the_pages_it_starts_and_ends_on() -> None:
    doc = load(paged_pdf(PAGES))
    hotels = doc.text.index("Hotels")
    taxis = doc.text.index("Taxis")
    assert page_range(doc.metadata, 0, 10) == (1, 1)
    assert page_range(doc.metadata, hotels, hotels + 6) == (3, 3)
    assert page_range(doc.metadata, 0, len(doc.text)) == (1, 4)
    assert page_range(doc.metadata, hotels, taxis + 5) == (3, 4)
    # A span ending exactly where page 4 starts does not reach page 4.
    meals = doc.text.index("Meals")
    assert page_range(doc.metadata, hotels, meals) == (3, 3)


def test_a_caller_cannot_supply_page_starts_for_a_pdf() -> None:
    doc = load(paged_pdf([["Only one page."]]), {PAGE_STARTS_KEY: "1:0,2:5", "team": "hr"})
    assert doc.metadata == {PAGE_STARTS_KEY: "1:0", "team": "hr"}


def test_page_marks_become_offsets() -> None:
    text, starts = take_page_marks(f"one\n\n{PAGE_MARK}two\n\n{PAGE_MARK}three", [1, 3, 7])
    assert text == "one\n\ntwo\n\nthree"
    assert starts == [(1, 0), (3, 5), (7, 10)]
    # Marks beyond the page numbers (none a loader makes) are dropped all the same.
    assert take_page_marks(f"a{PAGE_MARK}b", [1]) == ("ab", [(1, 0)])


def test_documents_without_pages_have_no_page_range() -> None:
    assert page_range({}, 0, 10) is None
    assert page_range({"team": "hr"}, 0, 10) is None
    text = load_bytes("a.md", "s", b"# A\n\ntext", DocumentFormat.MARKDOWN, max_bytes=1000)
    assert isinstance(text, LoadedDocument) and PAGE_STARTS_KEY not in text.metadata


def test_malformed_page_records_are_ignored() -> None:
    for bad in ("", "x", "1:0,1:5", "1:5", "2:0,1:9", "1:0,2:x", "0:0", "1:0,2:-1", "1:0,3:9,2:20"):
        assert parse_page_starts(bad) == [], bad
    assert parse_page_starts(encode_page_starts([(1, 0), (3, 40)]) or "") == [(1, 0), (3, 40)]
    # A record too long for a store's metadata index is not kept at all.
    many = [(p, 100_000 * p) for p in range(1, 5000)]
    assert encode_page_starts(many) is None
    assert len(encode_page_starts(many[:1000]) or "") <= MAX_PAGE_STARTS_CHARS
    # A span past the last page start stays on the last page.
    assert page_range({PAGE_STARTS_KEY: "1:0,2:10"}, 15, 999) == (2, 2)
