// Indexes view: status of every index, latest operations, start/cancel an
// ingestion and watch it live (WatchIngestion), push files by drag and drop
// (one upload a file, each with its progress and its result). What the key
// lacks is said in a notice; the parts it cannot use are left out.
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
import { access, lacks, notice, usable, type Access } from "./access.js";
import { describeError, ingestion, UploadError, uploadFile, type UploadResult } from "./api.js";
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

  constructor(
    private readonly showError: ShowError,
    private readonly openDocuments: (index: string) => void,
  ) {
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
    const a = access();
    notice("indexes-notice", usable(a) ? indexesNotice(a) : "");
    if (!usable(a)) {
      this.rows = [];
      this.renderTable();
      byId("index-detail").hidden = true;
      return;
    }
    try {
      const indexes: IndexDescription[] = [];
      let pageToken = "";
      do {
        const page = await ingestion.listIndexes({ pageSize: 100, pageToken });
        indexes.push(...page.indexes);
        pageToken = page.nextPageToken;
      } while (pageToken && indexes.length < 1000);
      // Status and counts need `manage`; without it the columns stay empty.
      const statuses = a.can.manage
        ? await Promise.all(
            indexes.map((index) =>
              ingestion.getIndexStatus({ indexName: index.name }).then((r) => r.status),
            ),
          )
        : [];
      this.rows = indexes.map((index, i) => ({ index, status: statuses[i] }));
      this.renderTable();
      if (!this.selected && this.rows.length > 0) this.selected = this.rows[0]!.index.name;
      if (this.selected && (a.can.manage || a.can.ingest)) await this.renderDetail();
      else byId("index-detail").hidden = true;
    } catch (err) {
      this.showError(err);
    }
  }

  private renderTable(): void {
    const tbody = byId("indexes-table").querySelector("tbody")!;
    clear(tbody);
    const can = access().can;
    const control = can.manage || can.ingest;
    for (const { index, status } of this.rows) {
      const running = status?.runningOperation;
      const last = running ?? status?.lastOperation;
      const emb = index.embedding;
      const actions: HTMLElement[] = [];
      if (control) {
        const start = h("button", { type: "button", "data-action": "start" }, "Start ingestion");
        start.addEventListener("click", () => void this.start(index.name));
        // Without `manage` the key sees no status: whether a run is going is the server's to say.
        const cancel = h(
          "button",
          { type: "button", "data-action": "cancel", disabled: can.manage && !running },
          "Cancel",
        );
        cancel.addEventListener("click", () => void this.cancel(index.name));
        const details = h(
          "button",
          { type: "button", "data-action": "details" },
          can.ingest ? "Operations & push" : "Operations",
        );
        details.addEventListener("click", () => {
          this.selected = index.name;
          void this.renderDetail();
        });
        actions.push(start, cancel, details);
      }
      if (can.retrieve) {
        const docs = h("button", { type: "button", "data-action": "documents" }, "Documents");
        docs.addEventListener("click", () => this.openDocuments(index.name));
        actions.push(docs);
      }
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
            status
              ? h("span", { class: `pill ${status.ready ? "ok" : "warn"}` }, status.ready ? "ready" : "not ready")
              : "–",
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
          h("td", { class: "actions" }, ...actions),
        ),
      );
    }
  }

  private async renderDetail(): Promise<void> {
    const name = this.selected;
    byId("index-detail").hidden = false;
    byId("drop-zone").hidden = !access().can.ingest;
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
    const list = byId("push-results");
    const index = this.selected;
    if (!index || files.length === 0) return;
    if (files.length > MAX_PUSH_FILES) {
      out.textContent = `At most ${MAX_PUSH_FILES} files at a time (got ${files.length}).`;
      return;
    }
    hideBanner();
    clear(list);
    out.textContent = `Pushing ${files.length} file(s) into ${index}…`;
    // One upload a file: a bad file fails alone, named with its reason.
    const rows = files.map((f) => {
      const bar = h("progress", { max: String(Math.max(f.size, 1)), value: "0" });
      bar.setAttribute("aria-label", `Upload of ${f.name}`);
      const state = h("span", { "data-field": "push-state" }, "waiting");
      const li = h("li", { "data-file": f.name }, h("span", { class: "mono" }, f.name), bar, state);
      list.appendChild(li);
      return { file: f, li, bar, state };
    });
    const totals = { upserted: 0, unchanged: 0, failed: 0 };
    for (const row of rows) {
      row.state.textContent = "sending…";
      const watching = new AbortController();
      const outcome = await pushOne(
        index,
        row.file,
        (sent, total) => {
          row.bar.max = Math.max(total, 1);
          row.bar.value = sent;
        },
        (operationId) => void followPush(operationId, row.state, watching.signal),
      );
      watching.abort();
      row.bar.value = row.bar.max;
      row.li.dataset["outcome"] = outcome.kind;
      row.state.textContent = outcome.text;
      row.state.className = `pill ${outcome.kind === "failed" ? "bad" : outcome.kind === "landed" ? "ok" : "warn"}`;
      if (outcome.kind === "landed") totals.upserted++;
      else if (outcome.kind === "unchanged") totals.unchanged++;
      else totals.failed++;
    }
    clear(out);
    out.appendChild(
      h(
        "p",
        { "data-field": "upsert-summary" },
        `Pushed ${files.length} file(s) into ${index}: ${totals.upserted} upserted, ` +
          `${totals.unchanged} unchanged, ${totals.failed} failed.`,
      ),
    );
    await this.refresh();
  }
}

interface PushOutcome {
  kind: "landed" | "unchanged" | "failed";
  text: string;
}

/** Sends one file (the binary upload route; Connect's UpsertDocuments on a server
 * without that route) and says what became of it. */
async function pushOne(
  index: string,
  file: File,
  progress: (sent: number, total: number) => void,
  onOperation: (operationId: string) => void,
): Promise<PushOutcome> {
  let r: UploadResult;
  try {
    r = await uploadFile(index, file, mediaTypeOf(file), progress, onOperation);
  } catch (err) {
    if (!(err instanceof UploadError)) throw err;
    if (err.status !== 404 || err.reason !== "METHOD_NOT_FOUND") {
      return { kind: "failed", text: `failed: ${err.reason || err.code} ${err.message}`.trim() };
    }
    try {
      r = await upsertOne(index, file);
    } catch (e) {
      const d = describeError(e);
      return { kind: "failed", text: `failed: ${d.reason || d.status} ${d.message}`.trim() };
    }
  }
  const f = r.failures[0];
  if (f) return { kind: "failed", text: `failed: ${f.reason}${f.message ? ` ${f.message}` : ""}` };
  if (r.upserted > 0) {
    const chunks = `${r.chunksWritten} chunk${r.chunksWritten === 1 ? "" : "s"}`;
    return { kind: "landed", text: `landed: ${chunks}, version ${r.publishedVersion}` };
  }
  return { kind: "unchanged", text: `unchanged (version ${r.publishedVersion})` };
}

/** The running push of an upload on its row: phase and chunks embedded, until
 * it ends or the upload's answer arrives (`signal`). A key that may not watch
 * it keeps "sending…". */
async function followPush(operationId: string, state: HTMLElement, signal: AbortSignal): Promise<void> {
  try {
    for await (const msg of ingestion.watchIngestion({ operationId }, { signal })) {
      const op = msg.operation;
      if (!op || TERMINAL.has(op.state)) break;
      const chunks = Number(op.counts?.chunksWritten ?? 0);
      state.textContent = `${enumName(OperationPhase, op.phase).toLowerCase()}: ${fmtNumber(chunks)} chunks embedded`;
    }
  } catch {
    // Aborted once the answer came, or not watchable: the answer says the rest.
  }
}

async function upsertOne(index: string, file: File): Promise<UploadResult> {
  const document = create(PushedDocumentSchema, {
    documentId: file.name,
    title: file.name,
    content: new Uint8Array(await file.arrayBuffer()),
    mediaType: mediaTypeOf(file),
  });
  const r = await ingestion.upsertDocuments({ indexName: index, documents: [document] });
  return { ...r, publishedVersion: String(r.publishedVersion), failures: r.failures.map((f) => ({ ...f })) };
}

/** What the Indexes view cannot do with this key, and what it still can. */
function indexesNotice(a: Access): string {
  const c = a.can;
  if (!c.manage && !c.ingest) {
    return (
      "This key cannot see index status, start ingestion or push files (it lacks manage and ingest); " +
      `it can list the indexes${c.retrieve ? ", search them and browse its tenant's documents" : ""}.`
    );
  }
  if (!c.manage) {
    return lacks(
      "list index status or counts",
      "manage",
      "you can still push files into an index by name, start or cancel ingestion of your tenant's indexes, and see the operations this key started",
    );
  }
  if (!c.ingest) return lacks("push files into an index", "ingest");
  return "";
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
    h("td", {}, triggerName(op.trigger)),
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

/** The trigger's name; a value newer than these stubs shows as its number. */
function triggerName(trigger: number): string {
  return OperationTrigger[trigger] ?? `trigger ${trigger}`;
}
