"""Clean text: a fixture set built in the test (HTML pages with page chrome and
inline code, hyphenated and two-column PDFs made with fpdf2, Markdown with code,
ODT and EPUB packages, extensionless text) and the exact text each must give."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from fpdf import FPDF

from groundwire.domain.operations import DocumentFailureReason
from groundwire.ingestion.html_text import html_to_text
from groundwire.ingestion.loaders import (
    DocumentFormat,
    LoadedDocument,
    LoadFailure,
    load_bytes,
    load_file,
    looks_like_text,
)
from groundwire.ingestion.pdf_text import join_hyphenated

MB = 1024 * 1024

DOCS_PAGE = """<!doctype html>
<html><head><title>Reset a password | Acme Docs</title>
<style>body { color: red }</style><script>track("page")</script></head>
<body>
<header class="site"><a href="/">Acme</a> <a href="/docs">Docs</a> <a href="/blog">Blog</a></header>
<nav aria-label="Sections"><ul><li><a href="/a">Install</a></li><li><a href="/b">Configure</a></li></ul></nav>
<div role="search"><input name="q"> Search the docs</div>
<main>
  <article>
    <header><h1>Reset a password</h1><p class="byline">Updated in May</p></header>
    <p>Call <code>reset_password()</code> with the
       <a href="/ids">user id</a>, then <em>wait</em> for the e-mail.</p>
    <h2>Example</h2>
    <pre><code>def reset(user):
    token = issue(user)
    send(token)
</code></pre>
    <ul><li>First <strong>step</strong></li><li>Second step</li></ul>
    <table><tr><th>Code</th><th>Meaning</th></tr><tr><td>E42</td><td>expired</td></tr></table>
    <p>Line one<br>Line two</p>
    <div hidden>Hidden text</div>
  </article>
</main>
<aside><h3>Related</h3><a href="/x">Other page</a></aside>
<footer><p>&copy; 2026 Acme &middot; <a href="/privacy">Privacy</a></p></footer>
</body></html>
"""

DOCS_PAGE_TEXT = """Reset a password

Updated in May

Call reset_password() with the user id, then wait for the e-mail.

Example

def reset(user):
    token = issue(user)
    send(token)

First step

Second step

Code | Meaning

E42 | expired

Line one
Line two"""


def loaded(result: LoadedDocument | LoadFailure) -> LoadedDocument:
    assert isinstance(result, LoadedDocument), result
    return result


def test_html_main_content_without_chrome_inline_kept_inline_and_pre_intact() -> None:
    text, title = html_to_text(DOCS_PAGE)
    assert title == "Reset a password | Acme Docs"
    assert text == DOCS_PAGE_TEXT
    doc = loaded(load_bytes("p.html", "s", DOCS_PAGE.encode(), DocumentFormat.HTML, max_bytes=MB))
    assert doc.text == DOCS_PAGE_TEXT


def test_html_without_main_uses_the_single_article_or_the_body() -> None:
    page = (
        "<body><nav>Menu Home</nav><article><p>The <b>article</b> body.</p></article>"
        "<footer>Footer</footer></body>"
    )
    assert html_to_text(page) == ("The article body.", "")
    two = "<body><article><h1>One</h1></article><article><p>Two</p></article></body>"
    assert html_to_text(two) == ("One\n\nTwo", "One")
    bare = "<p>Just <a href=x>a link</a> in a fragment.</p>"
    assert html_to_text(bare)[0] == "Just a link in a fragment."


def _pdf(lines: list[str]) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    for line in lines:
        pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def test_pdf_hyphenated_line_breaks_are_joined_and_real_hyphens_kept() -> None:
    data = _pdf(
        [
            "Robust data manip-",
            "ulation needs a state-of-the-",
            "art pipeline; see policy POL-HR-",
            "014 and the well-known rules. A well-",
            "known rule is kept.",
        ]
    )
    doc = loaded(load_bytes("h.pdf", "s", data, DocumentFormat.PDF, max_bytes=MB))
    assert "manipulation" in doc.text and "manip-" not in doc.text
    assert "state-of-the-art pipeline" in doc.text
    assert "POL-HR-014 and" in doc.text
    # The document writes "well-known" on one line: the broken one keeps its hyphen.
    assert "A well-known rule" in doc.text


@pytest.mark.parametrize(
    ("raw", "joined"),
    [
        ("manip-\nulation", "manipulation"),
        ("Data-\nbase", "Database"),
        ("state-of-the-\nart", "state-of-the-art"),
        ("POL-HR-\n014", "POL-HR-014"),
        ("2019-\n2020", "2019-2020"),
        ("x-\nY", "x-Y"),
        ("a list -\nnext", "a list -\nnext"),
        ("no hyphen\nhere", "no hyphen\nhere"),
        ("in-line hyphen stays", "in-line hyphen stays"),
    ],
)
def test_join_hyphenated_rules(raw: str, joined: str) -> None:
    assert join_hyphenated(raw) == joined


def test_two_column_pdf_reads_each_column_top_to_bottom() -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    pdf.text(15, 15, "A Two Column Paper Title Spanning The Page Width")
    left = [f"Left column sentence number {i} continues here." for i in range(1, 9)]
    right = [f"Right column sentence number {i} continues too." for i in range(1, 9)]
    # Drawn row by row, both columns interleaved: the worst order for a reader
    # that follows the content stream.
    for i, (a, b) in enumerate(zip(left, right, strict=True)):
        pdf.text(15, 30 + i * 6, a)
        pdf.text(110, 30 + i * 6, b)
    data = bytes(pdf.output())
    doc = loaded(load_bytes("c.pdf", "s", data, DocumentFormat.PDF, max_bytes=MB))
    lines = [line for line in doc.text.split("\n") if line.strip()]
    assert lines == ["A Two Column Paper Title Spanning The Page Width", *left, *right]


def test_single_column_pdf_text_is_unchanged_by_column_detection() -> None:
    lines = [f"Plain line {i} of an ordinary single column page." for i in range(12)]
    doc = loaded(load_bytes("p.pdf", "s", _pdf(lines), DocumentFormat.PDF, max_bytes=MB))
    assert doc.text.split("\n") == lines


def test_markdown_code_blocks_are_kept_intact() -> None:
    md = (
        "# Setup\n\nRun this:\n\n```python\ndef main():\n    return  42\n\n\nmain()\n```\n\n"
        "    indented   code\n\nAfter."
    )
    doc = loaded(load_bytes("a.md", "s", md.encode(), DocumentFormat.MARKDOWN, max_bytes=MB))
    assert "```python\ndef main():\n    return  42\n\n\nmain()\n```" in doc.text
    assert "    indented   code" in doc.text and doc.title == "Setup"


def _odt(body: str, title: str = "") -> bytes:
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        zf.writestr(
            "content.xml",
            f'<?xml version="1.0"?><office:document-content {ns}><office:body>'
            f"<office:text>{body}</office:text></office:body></office:document-content>",
        )
        zf.writestr(
            "meta.xml",
            '<?xml version="1.0"?><office:document-meta '
            'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/"><office:meta>'
            f"<dc:title>{title}</dc:title></office:meta></office:document-meta>",
        )
    return buf.getvalue()


def test_odt_headings_paragraphs_lists_and_tables() -> None:
    data = _odt(
        '<text:h text:outline-level="1">Leave policy</text:h>'
        "<text:p>Staff get <text:span>25</text:span><text:s/>days.</text:p>"
        '<text:h text:outline-level="2">Carry over</text:h>'
        "<text:list><text:list-item><text:p>Five days</text:p></text:list-item></text:list>"
        "<table:table><table:table-row><table:table-cell><text:p>A</text:p></table:table-cell>"
        "<table:table-cell><text:p>1</text:p></table:table-cell></table:table-row></table:table>",
        title="HR leave",
    )
    doc = loaded(load_bytes("l.odt", "s", data, DocumentFormat.ODT, max_bytes=MB))
    assert doc.text == (
        "# Leave policy\n\nStaff get 25 days.\n\n## Carry over\n\nFive days\n\nA | 1"
    )
    assert doc.title == "HR leave" and doc.format is DocumentFormat.MARKDOWN


def test_odt_entity_declarations_and_broken_packages_fail_cleanly() -> None:
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w") as zf:
        zf.writestr(
            "content.xml",
            '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">]><x>&a;</x>',
        )
    for data in (bomb.getvalue(), b"PK not a zip", _odt("<text:p>unclosed")):
        result = load_bytes("b.odt", "s", data, DocumentFormat.ODT, max_bytes=MB)
        assert isinstance(result, LoadFailure)
        assert result.reason is DocumentFailureReason.PARSE_FAILED


def _epub() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
        zf.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        zf.writestr(
            "OEBPS/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
            '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>The Manual'
            "</dc:title></metadata><manifest>"
            '<item id="c2" href="ch2.xhtml" media-type="application/xhtml+xml"/>'
            '<item id="c1" href="text/../ch%201.xhtml" media-type="application/xhtml+xml"/>'
            '<item id="gone" href="missing.xhtml" media-type="application/xhtml+xml"/>'
            '</manifest><spine><itemref idref="c1"/><itemref idref="gone"/><itemref idref="c2"/>'
            "</spine></package>",
        )
        zf.writestr(
            "OEBPS/ch 1.xhtml",
            "<html><body><nav>toc</nav><h1>Chapter one</h1><p>The <em>first</em> part.</p>"
            "</body></html>",
        )
        zf.writestr("OEBPS/ch2.xhtml", "<html><body><p>The second part.</p></body></html>")
    return buf.getvalue()


def test_epub_chapters_in_spine_order() -> None:
    doc = loaded(load_bytes("m.epub", "s", _epub(), DocumentFormat.EPUB, max_bytes=MB))
    assert doc.text == "Chapter one\n\nThe first part.\n\nThe second part."
    assert doc.title == "The Manual"


def test_text_like_and_extensionless_files(tmp_path: Path) -> None:
    (tmp_path / "guide.rst").write_text("Title\n=====\n\nSome *rst* text.\n")
    (tmp_path / "data.csv").write_text("id,name\n1,widget\n")
    (tmp_path / "README").write_text("Plain README without an extension.\n")
    (tmp_path / "blob").write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4)
    (tmp_path / "archive.gz").write_bytes(b"\x1f\x8b\x08\x00rest")
    docs = {
        name: load_file(tmp_path / name, name, "s", max_bytes=MB, metadata={})
        for name in ("guide.rst", "data.csv", "README", "blob", "archive.gz")
    }
    assert loaded(docs["guide.rst"]).text.startswith("Title\n=====")
    assert loaded(docs["data.csv"]).format is DocumentFormat.TEXT
    assert loaded(docs["README"]).title == "README"
    for name in ("blob", "archive.gz"):
        result = docs[name]
        assert isinstance(result, LoadFailure)
        assert result.reason is DocumentFailureReason.UNSUPPORTED_FORMAT


def test_looks_like_text() -> None:
    assert looks_like_text("naïve café ☕\n".encode()) is None
    # A multi-byte character cut at the sniff bound is still text.
    assert looks_like_text(("é" * 5000).encode()) is None
    assert looks_like_text(b"abc\x00def") is DocumentFailureReason.BINARY
    assert looks_like_text("caf\xe9".encode("latin-1")) is DocumentFailureReason.NOT_UTF8
    assert looks_like_text(b"text" + b"\x01\x02\x03" * 10) is DocumentFailureReason.BINARY


def test_operation_accounting_survives_the_record_round_trip() -> None:
    from groundwire.domain.operations import (
        DocumentFailureInfo,
        Operation,
        OperationCounts,
        OperationTrigger,
        OperationWarning,
    )

    op = Operation.new("docs", OperationTrigger.MANUAL, 1.0)
    failures = [DocumentFailureInfo(f"f{i}", DocumentFailureReason.EMPTY) for i in range(3)] + [
        DocumentFailureInfo(f"s{i}", DocumentFailureReason.UNSUPPORTED_FORMAT) for i in range(105)
    ]
    op = Operation.with_failures(
        Operation(
            op.id,
            "docs",
            op.state,
            op.trigger,
            1.0,
            counts=OperationCounts(
                failed=3, skipped=105, by_reason=(("EMPTY", 3), ("UNSUPPORTED_FORMAT", 105))
            ),
            warnings=(OperationWarning.NO_DOCUMENTS,),
        ),
        failures,
    )
    assert len(op.failures) == 3 and op.failures_omitted == 0
    assert len(op.skipped) == 100 and op.skipped_omitted == 5
    assert Operation.from_json(op.to_json()) == op
    # A record written before these fields existed still reads.
    old = op.to_json()
    for key in ("skipped", "skipped_omitted", "warnings", "by_reason"):
        old.pop(key)
    counts = old["counts"]
    assert isinstance(counts, dict)
    counts.pop("skipped")
    assert Operation.from_json(old).skipped == ()


def test_html_chrome_marked_by_class_or_id_outside_the_content_is_dropped() -> None:
    page = """<html><body>
    <div class="navbar"><a href="/">Home</a> <a href="/api">API</a></div>
    <div class="breadcrumbs">Docs &raquo; Guide</div>
    <div class="document"><div class="body">
      <h1>Install<a class="header-anchor" href="#install">#</a></h1>
      <p>Run <code>pip install acme</code> first.</p>
      <div class="toc-note">Keep this note.</div>
    </div></div>
    <div class="sphinxsidebar"><h3>Quick search</h3></div>
    <div id="footer">&copy; Acme</div>
    </body></html>"""
    text, _ = html_to_text(page)
    assert text == "Install\n\nRun pip install acme first.\n\nKeep this note."
    # Inside an article, the same words are content.
    inside = '<article><div class="sidebar">A sidebar story.</div></article>'
    assert html_to_text(inside)[0] == "A sidebar story."


def test_html_deeply_nested_or_huge_is_walked_without_recursion() -> None:
    deep = "<div>" * 20_000 + "deep <b>text</b>" + "</div>" * 20_000
    assert html_to_text(deep)[0] == "deep text"
    doc = loaded(load_bytes("d.html", "s", deep.encode(), DocumentFormat.HTML, max_bytes=MB))
    assert doc.text == "deep text"
