// Answers as Markdown (marked), sanitized (DOMPurify) into a DOM fragment: raw
// HTML in the Markdown is shown as text, never parsed, and the sanitizer keeps
// only the formatting tags below (no images, scripts, styles, forms or event
// handlers, no javascript: links). The answer's [n] markers then become links
// to the citations, in text outside code and links.
import DOMPurify from "dompurify";
import { Marked } from "marked";

const escapeHtml = (s: string): string =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

const markdown = new Marked({ gfm: true, async: false });
markdown.use({
  renderer: {
    // Raw HTML blocks and inline tags: shown as the text they are.
    html: (token) => escapeHtml(token.text),
    // Images: their alternative text (the page loads nothing from an answer).
    image: (token) => escapeHtml(token.text),
  },
});

const ALLOWED_TAGS = [
  "p", "br", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li", "a",
  "h1", "h2", "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th", "td",
];
const ALLOWED_ATTR = ["href", "title", "start", "align"];

/** The answer's Markdown as a sanitized fragment. */
export function renderMarkdown(text: string): DocumentFragment {
  const html = markdown.parse(text, { async: false });
  const fragment = DOMPurify.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOW_DATA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  });
  for (const a of fragment.querySelectorAll("a[href]")) {
    a.setAttribute("rel", "noopener noreferrer nofollow");
  }
  return fragment;
}

/** Replaces the [n] (and [n, m]) markers in the fragment's text, outside code and
 * links, with what `link(numbers)` makes of them (null: left as text). */
export function linkMarkers(
  root: DocumentFragment | Element,
  marker: RegExp,
  link: (numbers: number[]) => Node | null,
): void {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (n) =>
      n.parentElement?.closest("code, pre, a") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const texts: Text[] = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) texts.push(n as Text);
  for (const t of texts) {
    const value = t.data;
    const parts: (Node | string)[] = [];
    let last = 0;
    for (const m of value.matchAll(marker)) {
      const numbers = m[1]!.split(",").map((s) => Number(s.trim()));
      const node = link(numbers);
      if (!node) continue;
      parts.push(value.slice(last, m.index), node);
      last = m.index! + m[0].length;
    }
    if (parts.length === 0) continue;
    parts.push(value.slice(last));
    t.replaceWith(...parts);
  }
}
