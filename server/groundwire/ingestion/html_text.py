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


class _Out:
    """Paragraphs built from inline runs; whitespace collapsed except in <pre>."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self._line: list[str] = []

    def text(self, value: str) -> None:
        self._line.append(_SPACE.sub(" ", value))

    def raw(self, value: str) -> None:
        self.end_block()
        value = value.strip("\n")
        if value.strip():
            self.blocks.append(value)

    def line_break(self) -> None:
        self._line.append("\n")

    def end_block(self) -> None:
        joined = "".join(self._line)
        self._line = []
        lines = [" ".join(part.split()) for part in joined.split("\n")]
        paragraph = "\n".join(line for line in lines if line)
        if paragraph:
            self.blocks.append(paragraph)


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
    return "\n\n".join(out.blocks), title
