// Search view: Retrieve with mode, top-k, fusion settings and metadata filters;
// each result shows its content, title, section, span, score (metric,
// direction, relevance) and per-leg provenance.
import { create } from "@bufbuild/protobuf";
import {
  MetadataConditionSchema,
  MetadataFilterSchema,
  RetrievalLeg,
  RetrievalMode,
  ScoreMetric,
  StringListSchema,
  type MetadataCondition,
  type RetrievalResult,
  type Score,
} from "@gen/groundwire/v1/index.js";
import { access, lacks, notice, usable } from "./access.js";
import { indexNames, retriever, tenantEmpty, TENANT_EMPTY } from "./api.js";
import { byId, clear, enumName, fmtDuration, fmtScore, h, hideBanner } from "./dom.js";
import type { ShowError } from "./indexes.js";

// Each metric's wording and its short form (the inspector's one-line score).
const METRICS: Record<number, [label: string, short: string]> = {
  [ScoreMetric.COSINE_SIMILARITY]: ["cosine similarity", "cos"],
  [ScoreMetric.COSINE_DISTANCE]: ["cosine distance", "cos dist"],
  [ScoreMetric.EUCLIDEAN_DISTANCE]: ["euclidean distance", "L2"],
  [ScoreMetric.DOT_PRODUCT]: ["dot product", "dot"],
  [ScoreMetric.BM25]: ["BM25", "BM25"],
  [ScoreMetric.TEXT_RANK]: ["text rank", "rank"],
  [ScoreMetric.RECIPROCAL_RANK_FUSION]: ["reciprocal rank fusion", "RRF"],
  [ScoreMetric.RERANK_RELEVANCE]: ["rerank relevance", "rerank"],
};

export function scoreText(s: Score | undefined): string {
  if (!s) return "–";
  const metric = METRICS[s.metric]?.[0] ?? enumName(ScoreMetric, s.metric);
  const dir = s.higherIsBetter ? "higher is better" : "lower is better";
  const rel = s.relevance !== undefined ? `, relevance ${fmtScore(s.relevance)}` : "";
  return `${fmtScore(s.rawScore)} ${metric} (${dir}${rel})`;
}

/** "0.0328 RRF ↑": the inspector's one-line score (scoreText is its title). */
export function shortScore(s: Score | undefined): string {
  if (!s) return "–";
  const metric = METRICS[s.metric]?.[1] ?? enumName(ScoreMetric, s.metric);
  return `${fmtScore(s.rawScore)} ${metric} ${s.higherIsBetter ? "↑" : "↓"}`;
}

/** "key=value" (equals) or "key=a|b" (any of), one a line. */
export function parseFilters(text: string): MetadataCondition[] {
  const conditions: MetadataCondition[] = [];
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new Error(`filter line ${i + 1}: write key=value or key=a|b`);
    const key = line.slice(0, eq).trim();
    const value = line.slice(eq + 1).trim();
    const values = value.split("|").map((v) => v.trim());
    conditions.push(
      create(
        MetadataConditionSchema,
        values.length > 1
          ? { key, match: { case: "anyOf", value: create(StringListSchema, { values }) } }
          : { key, match: { case: "equals", value } },
      ),
    );
  }
  return conditions;
}

function optionalNumber(id: string): number | undefined {
  const v = byId<HTMLInputElement>(id).value.trim();
  return v === "" ? undefined : Number(v);
}

/** The fusion fields that are set, or no FusionOptions at all. */
function fusionOptions() {
  const f = {
    rrfK: optionalNumber("fusion-k"),
    semanticWeight: optionalNumber("fusion-sw"),
    lexicalWeight: optionalNumber("fusion-lw"),
    legDepth: optionalNumber("fusion-depth"),
  };
  return Object.values(f).some((v) => v !== undefined) ? f : undefined;
}

export class SearchView {
  constructor(private readonly showError: ShowError) {
    byId<HTMLFormElement>("search-form").addEventListener("submit", (e) => {
      e.preventDefault();
      void this.search();
    });
    byId("search-index").addEventListener("change", () => void this.checkTenant());
  }

  /** The index choices (ListIndexes, any valid key), or why this key cannot search. */
  async load(): Promise<void> {
    const a = access();
    const submit = byId<HTMLButtonElement>("search-form").querySelector<HTMLButtonElement>("button[type=submit]")!;
    submit.disabled = !a.can.retrieve;
    if (!usable(a)) return notice("search-notice", "");
    if (!a.can.retrieve) return notice("search-notice", lacks("search", "retrieve"));
    try {
      this.setIndexes(await indexNames());
    } catch (err) {
      this.showError(err);
      return;
    }
    await this.checkTenant();
  }

  /** The CLI's notice when the key's tenant has nothing in the chosen index. */
  private async checkTenant(): Promise<void> {
    const index = byId<HTMLSelectElement>("search-index").value;
    try {
      notice("search-notice", index && (await tenantEmpty(index)) ? TENANT_EMPTY : "");
    } catch (err) {
      this.showError(err);
    }
  }

  setIndexes(names: string[]): void {
    const select = byId<HTMLSelectElement>("search-index");
    const current = select.value;
    clear(select);
    for (const n of names) select.appendChild(h("option", { value: n }, n));
    if (names.includes(current)) select.value = current;
  }

  async search(): Promise<void> {
    const summary = byId("search-summary");
    const list = byId("search-results");
    let conditions: MetadataCondition[];
    try {
      conditions = parseFilters(byId<HTMLTextAreaElement>("search-filters").value);
    } catch (err) {
      summary.textContent = (err as Error).message;
      return;
    }
    hideBanner();
    summary.textContent = "Searching…";
    list.setAttribute("aria-busy", "true");
    try {
      const topK = optionalNumber("search-topk");
      const r = await retriever.retrieve({
        query: {
          indexName: byId<HTMLSelectElement>("search-index").value,
          text: byId<HTMLInputElement>("search-query").value,
          mode: Number(byId<HTMLSelectElement>("search-mode").value) as RetrievalMode,
          topK,
          filter: conditions.length ? create(MetadataFilterSchema, { conditions }) : undefined,
          fusion: fusionOptions(),
        },
      });
      clear(list);
      for (const result of r.results) list.appendChild(resultItem(result));
      const d = r.diagnostics;
      summary.textContent = d?.tenantScopeEmpty
        ? `No results (your key's tenant has no documents in this index).`
        : d
        ? `${r.results.length} results · ${enumName(RetrievalMode, d.appliedMode)} · top ${d.appliedTopK} · ` +
          `index version ${d.indexVersion} · ${d.semanticHits} semantic / ${d.lexicalHits} lexical hits` +
          (d.appliedMode === RetrievalMode.HYBRID
            ? ` · RRF k ${d.appliedRrfK}, weights ${d.appliedSemanticWeight}/${d.appliedLexicalWeight}, depth ${d.appliedLegDepth}`
            : "") +
          ` · ${fmtDuration(d.totalDuration)}`
        : `${r.results.length} results`;
    } catch (err) {
      summary.textContent = "";
      this.showError(err);
    } finally {
      list.removeAttribute("aria-busy");
    }
  }
}

function resultItem(r: RetrievalResult): HTMLLIElement {
  return h(
    "li",
    { class: "result", "data-document": r.documentId, "data-chunk": r.chunkId },
    h(
      "header",
      {},
      h("span", { class: "rank" }, `#${r.rank}`),
      h("strong", { class: "title" }, r.title || r.documentId),
      r.section ? h("span", { class: "section" }, ` › ${r.section}`) : null,
    ),
    h(
      "dl",
      { class: "meta" },
      h("dt", {}, "Document"),
      h("dd", { class: "mono" }, r.documentId),
      h("dt", {}, "Chunk"),
      h("dd", { class: "mono" }, r.chunkId),
      h("dt", {}, "Span"),
      h("dd", {}, r.span ? `characters ${r.span.start}–${r.span.end}` : "–"),
      h("dt", {}, "Score"),
      h("dd", { "data-field": "score" }, scoreText(r.score)),
      h("dt", {}, "Provenance"),
      h(
        "dd",
        {},
        r.provenance.length
          ? h(
              "ul",
              { class: "legs" },
              ...r.provenance.map((p) =>
                h("li", {}, `${enumName(RetrievalLeg, p.leg).toLowerCase()} #${p.rank}: ${scoreText(p.score)}`),
              ),
            )
          : "–",
      ),
    ),
    h("p", { class: "content" }, r.content),
  );
}
