"""The main text of an HTML page, without its chrome.

A principled extraction over selectolax's lexbor tree (no new dependency):

1. Drop what is never content: scripts, styles, templates, forms, embedded media,
   and elements hidden with `hidden` or `aria-hidden="true"`.
2. Drop page chrome: `nav`, `header`, `footer`, `aside` and the ARIA landmarks
   `navigation`, `banner`, `contentinfo`, `complementary`, `search`. A `header`
   or `footer` inside an `article` or `main` (an article's byline, a section's
   heading group) is content and kept. Sites without landmarks mark their chrome
   with class or id words (navbar, sidebar, breadcrumb, footer, ...): an element
   with one of those exact words, outside any main or article, is dropped too.
3. Take the main content: the `main` element (or `role="main"`), else the one
   `article`, else the body.
4. Walk it: block elements (p, div, li, h1-h6, tr, ...) become paragraphs, inline
   elements (a, code, em, strong, span, ...) stay inside their sentence with their
   whitespace collapsed, `br` is a line break, and `pre` is kept verbatim (its line
   breaks and indentation intact) so code blocks survive.
5. Record anchors: each element id met in the walk names the paragraph it starts
   (or the first one after it), so citations can link `page.html#id`
   (domain/anchors.py).
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

_NEVER_CONTENT = (
    "script, style, noscript, template, iframe, object, embed, svg, canvas, "
    "form, button, select, dialog, [hidden], [aria-hidden=true]"
)
_CHROME = (
    "nav, aside, [role=navigation], [role=banner], [role=contentinfo], "
    "[role=complementary], [role=search]"
)
# Page chrome of sites without landmarks, by an exact class or id word (never a
# prefix: "header-anchor" is not "header"), outside any main or article.
_CHROME_NAMES = frozenset(
    {
        "navbar", "sidebar", "breadcrumb", "breadcrumbs", "site-header", "site-footer",
        "skip-link", "cookie-banner", "sphinxsidebar", "related", "footer", "header", "menu",
        "toc",
    }
)  # fmt: skip
# Permalink anchors generators add to headings ("¶", "#"), dropped anywhere.
_ANCHOR_NAMES = frozenset({"headerlink", "header-anchor", "anchor-link", "anchorjs-link"})
_BLOCK = frozenset(
    {
        "address", "article", "blockquote", "body", "caption", "dd", "details", "div",
        "dl", "dt", "fieldset", "figcaption", "figure", "footer", "h1", "h2", "h3", "h4",
        "h5", "h6", "header", "hr", "html", "li", "main", "ol", "p", "section", "summary",
        "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
    }
)  # fmt: skip
_CELL = frozenset({"td", "th"})
_SPACE = re.compile(r"[ \t\n\r\f\v]+")


# Where an anchor's block starts, in the text html_to_marked_text returns:
# ANCHOR_MARK, the anchor's number in its list, ANCHOR_END (noncharacters, which
# normalization keeps and no document holds); take_anchor_marks removes them.
ANCHOR_MARK = "\ufdd1"
ANCHOR_END = "\ufdd2"
_MARKS = re.compile(f"{ANCHOR_MARK}([0-9]+){ANCHOR_END}")


def _unmarked(value: str) -> str:
    """A document's own text never reads as an anchor mark."""
    return value.replace(ANCHOR_MARK, "").replace(ANCHOR_END, "")


class _Out:
    """Paragraphs built from inline runs; whitespace collapsed except in <pre>.
    Element ids met on the way mark the start of the next paragraph."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.anchors: list[str] = []
        self._pending: list[int] = []
        self._line: list[str] = []

    def anchor(self, value: str) -> None:
        self._pending.append(len(self.anchors))
        self.anchors.append(value)

    def _append(self, block: str) -> None:
        marks = "".join(f"{ANCHOR_MARK}{n}{ANCHOR_END}" for n in self._pending)
        self._pending = []
        self.blocks.append(marks + block)

    def text(self, value: str) -> None:
        self._line.append(_SPACE.sub(" ", _unmarked(value)))

    def raw(self, value: str) -> None:
        self.end_block()
        value = _unmarked(value).strip("\n")
        if value.strip():
            self._append(value)

    def line_break(self) -> None:
        self._line.append("\n")

    def end_block(self) -> None:
        joined = "".join(self._line)
        self._line = []
        lines = [" ".join(part.split()) for part in joined.split("\n")]
        paragraph = "\n".join(line for line in lines if line)
        if paragraph:
            self._append(paragraph)


def _is_chrome_section(node: LexborNode) -> bool:
    """A header/footer that is page chrome: not inside an article or main."""
    parent = node.parent
    while parent is not None:
        if parent.tag in ("article", "main") or parent.attributes.get("role") == "main":
            return False
        parent = parent.parent
    return True


def _names(node: LexborNode) -> set[str]:
    attrs = node.attributes
    return {*(attrs.get("class") or "").lower().split(), (attrs.get("id") or "").lower()}


_END = object()  # marks the end of a block element on the walk's stack


def _walk(root: LexborNode, out: _Out) -> None:
    """Depth-first over the tree with an explicit stack (no recursion: a page of
    thousands of nested elements is walked like any other)."""
    stack: list[LexborNode | object] = []

    def push_children(node: LexborNode) -> None:
        children = []
        child = node.child
        while child is not None:
            children.append(child)
            child = child.next
        stack.extend(reversed(children))

    push_children(root)
    while stack:
        item = stack.pop()
        if item is _END:
            out.end_block()
            continue
        assert isinstance(item, LexborNode)
        tag = item.tag
        if tag != "-text":
            ident = item.attributes.get("id")
            if ident and ident.strip():
                out.anchor(ident.strip())
        if tag == "-text":
            out.text(item.text_content or "")
        elif tag == "pre":
            out.raw(item.text(deep=True))
        elif tag == "br":
            out.line_break()
        elif tag in _CELL:
            # Cells of a row stay on one line, separated like a table row.
            out.text(" | " if item.prev is not None and item.prev.tag in _CELL else "")
            push_children(item)
        elif tag in _BLOCK:
            out.end_block()
            stack.append(_END)
            push_children(item)
        elif tag not in ("-comment", "head", "title"):
            push_children(item)


def html_to_text(html: str) -> tuple[str, str]:
    """(main text, title) of an HTML document."""
    text, title, _ = html_to_marked_text(html)
    return _MARKS.sub("", text), title


def take_anchor_marks(text: str, anchors: list[str]) -> tuple[str, list[tuple[int, str]]]:
    """`text` without its anchor marks, and `(offset, id)` of each mark in it."""
    out: list[str] = []
    found: list[tuple[int, str]] = []
    size = last = 0
    for match in _MARKS.finditer(text):
        out.append(text[last : match.start()])
        size += match.start() - last
        last = match.end()
        n = int(match.group(1))
        if n < len(anchors):
            found.append((size, anchors[n]))
    out.append(text[last:])
    return "".join(out), found


def html_to_marked_text(html: str) -> tuple[str, str, list[str]]:
    """(main text with anchor marks, title, the anchors' ids) of an HTML document:
    each element id of the main content marks the start of the first paragraph at
    or after the element's start."""
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node is not None else ""
    for selector in (_NEVER_CONTENT, _CHROME):
        for node in tree.css(selector):
            node.decompose()
    for node in tree.css("header, footer"):
        if _is_chrome_section(node):
            node.decompose()
    for node in tree.css("[class], [id]"):
        names = _names(node)
        if _ANCHOR_NAMES.intersection(names) or (
            _CHROME_NAMES.intersection(names) and _is_chrome_section(node)
        ):
            node.decompose()
    root = tree.css_first("main") or tree.css_first("[role=main]")
    if root is None:
        articles = tree.css("article")
        root = articles[0] if len(articles) == 1 else (tree.body or tree.root)
    out = _Out()
    if root is not None:
        _walk(root, out)
        out.end_block()
    if not title:
        h1 = tree.css_first("h1")
        title = " ".join(h1.text().split()) if h1 is not None else ""
    return "\n\n".join(out.blocks), title, out.anchors
