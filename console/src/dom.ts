// Tiny DOM helpers: every text goes through textContent, never innerHTML, so
// document content and server messages cannot inject markup.
import type { Timestamp, Duration } from "@bufbuild/protobuf/wkt";

type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | boolean | undefined> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (name === "class") el.className = String(value);
    else el.setAttribute(name, value === true ? "" : value);
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`missing element #${id}`);
  return el as T;
}

export function clear(el: Element): void {
  el.replaceChildren();
}

/** "SUCCEEDED" from an enum value and its protobuf-es enum object. */
export function enumName(e: Record<number, string>, value: number): string {
  return e[value] ?? String(value);
}

export function fmtNumber(n: number | bigint): string {
  return typeof n === "bigint" ? n.toLocaleString("en-US") : n.toLocaleString("en-US");
}

export function fmtScore(n: number | undefined): string {
  if (n === undefined) return "–";
  return Math.abs(n) >= 100 ? n.toFixed(1) : n.toFixed(4);
}

export function fmtTime(ts: Timestamp | undefined): string {
  if (!ts) return "–";
  const ms = Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6);
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

export function fmtDuration(d: Duration | undefined): string {
  if (!d) return "–";
  const s = Number(d.seconds) + d.nanos / 1e9;
  return s >= 1 ? `${s.toFixed(2)} s` : `${(s * 1000).toFixed(1)} ms`;
}

/** Hides the error banner: a new user action starts with a clean slate. */
export function hideBanner(): void {
  const banner = document.getElementById("error-banner");
  if (banner) banner.hidden = true;
}
