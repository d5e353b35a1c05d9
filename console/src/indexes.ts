// Indexes view: status of every index, latest operations, start/cancel an
// ingestion and watch it live (WatchIngestion), push files by drag and drop.
import { create } from "@bufbuild/protobuf";
import {
  OperationPhase,
  OperationState,
  OperationTrigger,
  PushedDocumentSchema,
  type IndexDescription,
  type IndexStatus,
  type Operation,
} from "@gen/groundwire/v1/index.js";
import { ingestion } from "./api.js";
import { byId, clear, enumName, fmtDuration, fmtNumber, fmtTime, h, hideBanner } from "./dom.js";

export type ShowError = (err: unknown) => void;

const TERMINAL = new Set([OperationState.SUCCEEDED, OperationState.FAILED, OperationState.CANCELLED]);
const MAX_PUSH_FILES = 256;

// What the server's loaders read (ingestion.proto PushedDocument.media_type),
// by extension, for files the browser gives no type (Markdown, YAML, ...).
const MEDIA_TYPES: Record<string, string> = {
  pdf: "application/pdf",
  docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  pptx: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  odt: "application/vnd.oasis.opendocument.text",
  epub: "application/epub+zip",
  html: "text/html",
  htm: "text/html",
  xhtml: "application/xhtml+xml",
  md: "text/markdown",
  markdown: "text/markdown",
  txt: "text/plain",
  text: "text/plain",
  csv: "text/csv",
  tsv: "text/tab-separated-values",
  rst: "text/x-rst",
  json: "application/json",
  ndjson: "application/x-ndjson",
  jsonl: "application/x-ndjson",
  xml: "application/xml",
  yaml: "application/yaml",
  yml: "application/yaml",
};

export function mediaTypeOf(file: File): string {
  const ext = file.name.toLowerCase().split(".").pop() ?? "";
  return MEDIA_TYPES[ext] ?? file.type ?? "";
}

interface Row {
  index: IndexDescription;
  status: IndexStatus | undefined;
}

export class IndexesView {
  private selected = "";
  private watching: AbortController | null = null;
  private rows: Row[] = [];

  constructor(private readonly showError: ShowError) {
    byId("indexes-refresh").addEventListener("click", () => void this.refresh());
    const zone = byId("drop-zone");
    zone.addEventListener("dragover", (e) => {
      e.preventDefault();
      zone.classList.add("over");
    });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (e) => {
      e.preventDefault();
      zone.classList.remove("over");
      const files = e.dataTransfer ? Array.from(e.dataTransfer.files) : [];
      void this.push(files);
    });
    zone.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        byId<HTMLInputElement>("drop-input").click();
      }
    });
    const input = byId<HTMLInputElement>("drop-input");
    input.addEventListener("change", () => {
      const files = input.files ? Array.from(input.files) : [];
      input.value = "";
      void this.push(files);
    });
  }

  async refresh(): Promise<void> {
    try {
      const indexes: IndexDescription[] = [];
      let pageToken = "";
      do {
        const page = await ingestion.listIndexes({ pageSize: 100, pageToken });
        indexes.push(...page.indexes);
        pageToken = page.nextPageToken;
      } while (pageToken && indexes.length < 1000);
      const statuses = await Promise.all(
        indexes.map((index) =>
          ingestion.getIndexStatus({ indexName: index.name }).then((r) => r.status),
        ),
      );
      this.rows = indexes.map((index, i) => ({ index, status: statuses[i] }));
      this.renderTable();
      if (!this.selected && this.rows.length > 0) this.selected = this.rows[0]!.index.name;
      if (this.selected) await this.renderDetail();
    } catch (err) {
      this.showError(err);
    }
  }

  private renderTable(): void {
    const tbody = byId("indexes-table").querySelector("tbody")!;
    clear(tbody);
    for (const { index, status } of this.rows) {
      const running = status?.runningOperation;
      const last = running ?? status?.lastOperation;
      const emb = index.embedding;
      const start = h("button", { type: "button", "data-action": "start" }, "Start ingestion");
      start.addEventListener("click", () => void this.start(index.name));
      const cancel = h(
        "button",
        { type: "button", "data-action": "cancel", disabled: !running },
        "Cancel",
      );
      cancel.addEventListener("click", () => void this.cancel(index.name));
      const details = h("button", { type: "button", "data-action": "details" }, "Operations & push");
      details.addEventListener("click", () => {
        this.selected = index.name;
        void this.renderDetail();
      });
      tbody.appendChild(
        h(
          "tr",
          { "data-index": index.name, "aria-current": this.selected === index.name ? "true" : undefined },
          h(
            "th",
            { scope: "row" },
            h("span", { class: "name" }, index.name),
            index.description ? h("span", { class: "help block" }, index.description) : null,
          ),
          h(
            "td",
            { "data-field": "status" },
            h("span", { class: `pill ${status?.ready ? "ok" : "warn"}` }, status?.ready ? "ready" : "not ready"),
            running ? h("span", { class: "pill busy" }, "ingesting") : null,
          ),
          h("td", { class: "num", "data-field": "version" }, status ? fmtNumber(status.publishedVersion) : "–"),
          h("td", { class: "num", "data-field": "documents" }, status ? fmtNumber(status.documentCount) : "–"),
          h("td", { class: "num", "data-field": "chunks" }, status ? fmtNumber(status.chunkCount) : "–"),
          h(
            "td",
            {},
            emb && emb.model
              ? `${emb.provider}/${emb.model} (${emb.dimensions} d, ${index.metric || "–"})`
              : "lexical only",
          ),
          h("td", {}, last ? `${enumName(OperationState, last.state)} · ${fmtTime(last.endTime ?? last.startTime)}` : "–"),
          h("td", { class: "actions" }, start, cancel, details),
        ),
      );
    }
  }

  private async renderDetail(): Promise<void> {
    const name = this.selected;
    byId("index-detail").hidden = false;
    byId("h-detail").textContent = `Index ${name}`;
    for (const tr of byId("indexes-table").querySelectorAll("tbody tr")) {
      if ((tr as HTMLElement).dataset["index"] === name) tr.setAttribute("aria-current", "true");
      else tr.removeAttribute("aria-current");
    }
    try {
      const ops = await ingestion.listOperations({ indexName: name, pageSize: 10 });
      const tbody = byId("operations-table").querySelector("tbody")!;
      clear(tbody);
      for (const op of ops.operations) tbody.appendChild(operationRow(op));
      if (ops.operations.length === 0) {
        tbody.appendChild(h("tr", {}, h("td", { colspan: "8" }, "No operations yet.")));
      }
    } catch (err) {
      this.showError(err);
    }
  }

  async start(name: string): Promise<void> {
    hideBanner();
    this.selected = name;
    try {
      const r = await ingestion.startIngestion({ indexName: name });
      if (r.operation) await this.watch(r.operation);
    } catch (err) {
      this.showError(err);
    }
  }

  async cancel(name: string): Promise<void> {
    hideBanner();
    try {
      await ingestion.cancelIngestion({ indexName: name });
    } catch (err) {
      this.showError(err);
    }
    await this.refresh();
  }

  private async watch(first: Operation): Promise<void> {
    this.watching?.abort();
    const abort = new AbortController();
    this.watching = abort;
    const progress = byId("ingestion-progress");
    await this.refresh();
    showProgress(progress, first);
    try {
      for await (const msg of ingestion.watchIngestion(
        { operationId: first.id },
        { signal: abort.signal },
      )) {
        if (msg.operation) showProgress(progress, msg.operation);
        if (msg.operation && TERMINAL.has(msg.operation.state)) break;
      }
    } catch (err) {
      if (!abort.signal.aborted) this.showError(err);
    } finally {
      if (this.watching === abort) this.watching = null;
    }
    await this.refresh();
  }

  async push(files: File[]): Promise<void> {
    const out = byId("upsert-result");
    if (!this.selected || files.length === 0) return;
    if (files.length > MAX_PUSH_FILES) {
      out.textContent = `At most ${MAX_PUSH_FILES} files at a time (got ${files.length}).`;
      return;
    }
    hideBanner();
    out.textContent = `Pushing ${files.length} file(s) into ${this.selected}…`;
    try {
      const documents = await Promise.all(
        files.map(async (f) =>
          create(PushedDocumentSchema, {
            documentId: f.name,
            title: f.name,
            content: new Uint8Array(await f.arrayBuffer()),
            mediaType: mediaTypeOf(f),
          }),
        ),
      );
      const r = await ingestion.upsertDocuments({ indexName: this.selected, documents });
      clear(out);
      out.appendChild(
        h(
          "p",
          { "data-field": "upsert-summary" },
          `Version ${fmtNumber(r.publishedVersion)}: ${r.upserted} upserted, ${r.unchanged} unchanged, ` +
            `${r.chunksWritten} chunks written, ${r.failures.length} failed.`,
        ),
      );
      if (r.failures.length) {
        out.appendChild(
          h("ul", {}, ...r.failures.map((f) => h("li", {}, `${f.documentId}: ${f.reason}`))),
        );
      }
    } catch (err) {
      out.textContent = "";
      this.showError(err);
    }
    await this.refresh();
  }
}

function countsText(op: Operation): string {
  const c = op.counts;
  if (!c) return "–";
  return (
    `${c.discovered} discovered, ${c.ingested} ingested, ${c.unchanged} unchanged, ` +
    `${c.failed} failed, ${c.deleted} deleted, ${c.chunksWritten} chunks`
  );
}

function operationRow(op: Operation): HTMLTableRowElement {
  return h(
    "tr",
    { "data-operation": op.id },
    h("td", { class: "mono" }, op.id),
    h("td", {}, h("span", { class: `pill ${stateClass(op.state)}` }, enumName(OperationState, op.state))),
    h("td", {}, enumName(OperationTrigger, op.trigger)),
    h("td", {}, enumName(OperationPhase, op.phase)),
    h("td", { class: "num" }, op.version ? fmtNumber(op.version) : "–"),
    h("td", {}, countsText(op), op.errorCode ? h("span", { class: "pill bad" }, op.errorCode) : null),
    h("td", {}, fmtTime(op.startTime ?? op.createTime)),
    h("td", {}, fmtDuration(op.elapsed)),
  );
}

function stateClass(state: OperationState): string {
  if (state === OperationState.SUCCEEDED) return "ok";
  if (state === OperationState.FAILED) return "bad";
  if (state === OperationState.CANCELLED) return "warn";
  return "busy";
}

function showProgress(el: HTMLElement, op: Operation): void {
  clear(el);
  const c = op.counts;
  const total = c?.discovered ?? 0;
  const done = c ? c.ingested + c.unchanged + c.failed + (c.skipped ?? 0) : 0;
  const bar = h("progress", { max: String(Math.max(total, 1)), value: String(Math.min(done, Math.max(total, 1))) });
  bar.setAttribute("aria-label", "Ingestion progress");
  el.appendChild(
    h(
      "p",
      {},
      "Operation ",
      h("span", { class: "mono" }, op.id),
      " on ",
      op.indexName,
      ": ",
      h("strong", { "data-field": "operation-state" }, enumName(OperationState, op.state)),
      ` · ${enumName(OperationPhase, op.phase)} · ${countsText(op)}`,
      op.errorCode ? ` · error ${op.errorCode}` : "",
    ),
  );
  el.appendChild(bar);
}
