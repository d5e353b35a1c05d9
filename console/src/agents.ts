// Agents view: a chat over ExecuteStream (the answer streams as text deltas),
// numbered citations linked to their chunks, and an inspector for the RAG
// metadata (candidates, accepted / rejected / excluded with reasons,
// reranking outcome, context budget).
import {
  Answerability,
  ExecutionEventType,
  ExecutionMode,
  NoContextReason,
  RagItemReason,
  RerankOutcome,
  RetrievalMode,
  TurnRole,
  type AgentDescription,
  type AgentResult,
  type Citation,
  type ConversationTurnSchema,
  type RagExecutionMetadata,
  type RagItem,
} from "@gen/groundwire/v1/index.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { access, lacks, notice, usable } from "./access.js";
import { agents } from "./api.js";
import { byId, clear, enumName, fmtDuration, fmtScore, h, hideBanner } from "./dom.js";
import type { ShowError } from "./indexes.js";
import { linkMarkers, renderMarkdown } from "./markdown.js";
import { scoreText, shortScore } from "./search.js";

const MARKER = /\[([0-9][0-9,\s]*)\]/g;
const MAX_HISTORY_TURNS = 20;

let answerSerial = 0;

export class AgentsView {
  private agentList: AgentDescription[] = [];
  private history: MessageInitShape<typeof ConversationTurnSchema>[] = [];
  private running: AbortController | null = null;

  constructor(private readonly showError: ShowError) {
    byId<HTMLFormElement>("chat-form").addEventListener("submit", (e) => {
      e.preventDefault();
      void this.send();
    });
    const input = byId<HTMLTextAreaElement>("chat-input");
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        byId<HTMLFormElement>("chat-form").requestSubmit();
      }
    });
    byId("chat-stop").addEventListener("click", () => this.running?.abort());
    byId("chat-clear").addEventListener("click", () => {
      this.running?.abort();
      this.history = [];
      clear(byId("chat-log"));
    });
    byId<HTMLSelectElement>("agent-select").addEventListener("change", () => this.describe());
  }

  async refresh(): Promise<void> {
    const a = access();
    byId<HTMLButtonElement>("chat-send").disabled = !a.can.execute;
    if (!usable(a)) return notice("agents-notice", "");
    if (!a.can.execute) {
      clear(byId("agent-select"));
      return notice("agents-notice", lacks("list agents or chat with them", "execute"));
    }
    notice("agents-notice", "");
    try {
      const list: AgentDescription[] = [];
      let pageToken = "";
      do {
        const page = await agents.listAgents({ pageSize: 100, pageToken });
        list.push(...page.agents);
        pageToken = page.nextPageToken;
      } while (pageToken && list.length < 1000);
      this.agentList = list;
      const select = byId<HTMLSelectElement>("agent-select");
      const current = select.value;
      clear(select);
      for (const a of list) select.appendChild(h("option", { value: a.id }, a.name ? `${a.name} (${a.id})` : a.id));
      if (list.some((a) => a.id === current)) select.value = current;
      this.describe();
    } catch (err) {
      this.showError(err);
    }
  }

  private describe(): void {
    const id = byId<HTMLSelectElement>("agent-select").value;
    const a = this.agentList.find((x) => x.id === id);
    const rag = a?.rag;
    byId("agent-description").textContent = a
      ? `${a.description || ""}${rag ? ` Answers from index ${rag.indexName} (${enumName(ExecutionMode, rag.mode).toLowerCase()}, ${enumName(RetrievalMode, rag.retrievalMode).toLowerCase()}).` : ""} Model: ${a.model}.`
      : "";
  }

  async send(): Promise<void> {
    const input = byId<HTMLTextAreaElement>("chat-input");
    const message = input.value.trim();
    const agentId = byId<HTMLSelectElement>("agent-select").value;
    if (!message || !agentId || this.running) return;
    input.value = "";
    hideBanner();
    const log = byId("chat-log");
    log.appendChild(h("div", { class: "msg user" }, h("span", { class: "who" }, "You"), h("p", {}, message)));
    const answerEl = h("div", { class: "answer", "data-field": "answer" });
    const statusEl = h("p", { class: "help", "data-field": "chat-status" }, "Searching…");
    const bubble = h(
      "div",
      { class: "msg assistant", "aria-busy": "true" },
      h("span", { class: "who" }, "Assistant"),
      answerEl,
      statusEl,
    );
    log.appendChild(bubble);
    log.scrollTop = log.scrollHeight;

    const abort = new AbortController();
    this.running = abort;
    byId<HTMLButtonElement>("chat-send").disabled = true;
    byId<HTMLButtonElement>("chat-stop").disabled = false;
    let text = "";
    let result: AgentResult | undefined;
    try {
      const stream = agents.executeStream(
        { input: { agentId, message, history: this.history.slice(-MAX_HISTORY_TURNS) } },
        { signal: abort.signal },
      );
      for await (const ev of stream) {
        switch (ev.type) {
          case ExecutionEventType.RAG_SEARCH_STARTED:
            statusEl.textContent = "Searching the index…";
            break;
          case ExecutionEventType.RAG_SEARCH_COMPLETED:
            statusEl.textContent = ev.ragSearch
              ? `Found ${ev.ragSearch.candidateCount} candidates, accepted ${ev.ragSearch.acceptedCount}; answering…`
              : "Answering…";
            if (ev.rag) this.inspect(ev.rag, []);
            break;
          case ExecutionEventType.TEXT_DELTA:
            text += ev.textDelta;
            answerEl.replaceChildren(renderMarkdown(text));
            log.scrollTop = log.scrollHeight;
            break;
          case ExecutionEventType.EXECUTION_COMPLETED:
            result = ev.result;
            break;
          case ExecutionEventType.EXECUTION_FAILED:
            statusEl.textContent = `Failed: ${ev.errorCode} ${ev.errorMessage}`;
            break;
          default:
            break;
        }
      }
      if (result) {
        renderAnswer(bubble, answerEl, statusEl, result);
        if (result.rag) this.inspect(result.rag, result.citations);
        this.history.push(
          { role: TurnRole.USER, content: message },
          { role: TurnRole.ASSISTANT, content: result.answer },
        );
      }
    } catch (err) {
      statusEl.textContent = abort.signal.aborted ? "Stopped." : "Failed.";
      if (!abort.signal.aborted) this.showError(err);
    } finally {
      bubble.removeAttribute("aria-busy");
      this.running = null;
      byId<HTMLButtonElement>("chat-send").disabled = false;
      byId<HTMLButtonElement>("chat-stop").disabled = true;
    }
  }

  private inspect(rag: RagExecutionMetadata, citations: Citation[]): void {
    const body = byId("inspector-body");
    clear(body);
    if (!rag.enabled) {
      body.appendChild(h("p", {}, rag.ragBypassed ? "RAG was bypassed for this call." : "This agent does not use RAG."));
      return;
    }
    const cited = new Set(citations.map((c) => c.chunkId));
    body.appendChild(
      h(
        "dl",
        { class: "meta", "data-field": "rag-summary" },
        h("dt", {}, "Index"),
        h("dd", {}, `${rag.indexName} v${rag.indexVersion}`),
        h("dt", {}, "Mode"),
        h("dd", {}, `${enumName(ExecutionMode, rag.appliedMode).toLowerCase()}, ${enumName(RetrievalMode, rag.retrievalMode).toLowerCase()} retrieval`),
        h("dt", {}, "Context"),
        h(
          "dd",
          {},
          rag.contextAccepted
            ? "accepted"
            : `none (${enumName(NoContextReason, rag.noContextReason).toLowerCase().replaceAll("_", " ")})`,
          rag.modelSkipped ? "; model skipped" : "",
        ),
        h("dt", {}, "Counts"),
        h(
          "dd",
          {},
          `${rag.candidateCount} candidates, ${rag.acceptedCount} accepted, ${rag.rejectedCount} rejected, ${rag.contextExcludedCount} excluded from context`,
        ),
      ),
    );
    const rr = rag.reranking;
    if (rr) {
      body.appendChild(h("h4", {}, "Reranking"));
      body.appendChild(
        h(
          "p",
          { "data-field": "reranking" },
          rr.ran
            ? `${enumName(RerankOutcome, rr.outcome).toLowerCase()} over ${rr.candidateCount} candidates in ${fmtDuration(rr.duration)}` +
                `; answerability ${enumName(Answerability, rr.answerability).toLowerCase().replaceAll("_", " ")}` +
                (rr.timedOut ? "; timed out" : "") +
                (rr.failureCode ? `; failure ${rr.failureCode}` : "")
            : rr.requested
              ? `not run (${enumName(RerankOutcome, rr.outcome).toLowerCase()})`
              : "not requested",
        ),
      );
    }
    const b = rag.contextBudget;
    if (b) {
      body.appendChild(h("h4", {}, "Context budget"));
      body.appendChild(
        h(
          "p",
          { "data-field": "budget" },
          `${b.usedTokens} of ${b.availableTokens} available tokens used (maximum ${b.maximumContextTokens}; ` +
            `reserve ${b.responseTokenReserve}, instructions ${b.instructionTokens}, history ${b.historyTokens}, ` +
            `query ${b.queryTokens}, other ${b.otherTokens})`,
        ),
      );
    }
    body.appendChild(itemTable("Candidates", rag.candidates, cited));
    body.appendChild(itemTable("Accepted", rag.accepted, cited));
    body.appendChild(itemTable("Rejected", rag.rejected, cited));
    body.appendChild(itemTable("Excluded from context", rag.contextExcluded, cited));
  }
}

function itemTable(title: string, items: RagItem[], cited: Set<string>): HTMLElement {
  const details = h("details", { open: title !== "Candidates" && items.length > 0 }, h("summary", {}, `${title} (${items.length})`));
  if (items.length === 0) return details;
  const table = h(
    "table",
    { class: "compact" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col" }, "Rank"),
        h("th", { scope: "col" }, "Source"),
        h("th", { scope: "col" }, "Score"),
        h("th", { scope: "col" }, "Rerank"),
        h("th", { scope: "col" }, "Reason"),
      ),
    ),
    h(
      "tbody",
      {},
      ...items.map((it) =>
        h(
          "tr",
          { "data-chunk": it.chunkId },
          h("td", { class: "num" }, String(it.retrievalRank)),
          h(
            "td",
            {},
            it.title || it.documentId,
            it.section ? ` › ${it.section}` : "",
            cited.has(it.chunkId) ? h("span", { class: "pill ok" }, "cited") : null,
          ),
          h("td", { class: "score", title: scoreText(it.score) }, shortScore(it.score)),
          h("td", { class: "num" }, it.rerankRelevance !== undefined ? fmtScore(it.rerankRelevance) : "–"),
          h(
            "td",
            {},
            it.reason === RagItemReason.UNSPECIFIED
              ? "–"
              : enumName(RagItemReason, it.reason).toLowerCase().replaceAll("_", " "),
          ),
        ),
      ),
    ),
  );
  details.appendChild(h("div", { class: "scroll" }, table));
  return details;
}

/** The answer with its [source_number] markers shown as links [display_number]
 * to the numbered citations below it. */
function renderAnswer(bubble: HTMLElement, answerEl: HTMLElement, statusEl: HTMLElement, r: AgentResult): void {
  const serial = ++answerSerial;
  const bySource = new Map<number, Citation>();
  for (const c of r.citations) bySource.set(c.sourceNumber, c);
  const fragment = renderMarkdown(r.answer);
  linkMarkers(fragment, MARKER, (numbers) => {
    if (!numbers.every((n) => bySource.has(n))) return null;
    const span = h("span", { class: "cite-group" }, "[");
    numbers.forEach((n, i) => {
      const c = bySource.get(n)!;
      if (i > 0) span.append(", ");
      span.appendChild(
        h("a", { href: `#cite-${serial}-${c.displayNumber}`, class: "cite", "aria-label": `citation ${c.displayNumber}` }, String(c.displayNumber)),
      );
    });
    span.append("]");
    return span;
  });
  answerEl.replaceChildren(fragment);
  statusEl.textContent =
    `${r.model} · ${fmtDuration(r.duration)}` + (r.usage ? ` · ${r.usage.totalTokens} tokens` : "");
  if (r.citations.length === 0) return;
  bubble.appendChild(
    h(
      "ol",
      { class: "citations", "aria-label": "Citations" },
      ...r.citations.map((c) =>
        h(
          "li",
          { id: `cite-${serial}-${c.displayNumber}`, value: String(c.displayNumber), "data-chunk": c.chunkId, tabindex: "-1" },
          h("strong", {}, c.title || c.documentId),
          c.section ? ` › ${c.section}` : "",
          h(
            "span",
            { class: "help block mono" },
            `${c.documentId} · chunk ${c.chunkId}` + (c.span ? ` · characters ${c.span.start}–${c.span.end}` : ""),
          ),
          c.snippet ? h("blockquote", {}, c.snippet + (c.snippetTruncated ? "…" : "")) : null,
        ),
      ),
    ),
  );
}
