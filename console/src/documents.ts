// Documents view: the key's tenant's published documents of an index, a page at
// a time (ListDocuments' page tokens), one inspected (GetDocument: metadata,
// chunks with their spans and sections) and deleted after a confirm step
// (DeleteDocuments).
import type { DocumentInfo, GetDocumentResponse } from "@gen/groundwire/v1/index.js";
import { access, lacks, notice, usable } from "./access.js";
import { indexNames, ingestion, TENANT_EMPTY } from "./api.js";
import { byId, clear, fmtNumber, fmtTime, h, hideBanner } from "./dom.js";
import type { ShowError } from "./indexes.js";

export class DocumentsView {
  private wanted = "";
  /** The tokens of the pages before the shown one, and the shown page's own. */
  private tokens: string[] = [];
  private token = "";
  private next = "";

  constructor(private readonly showError: ShowError) {
    const select = byId<HTMLSelectElement>("documents-index");
    select.addEventListener("change", () => {
      this.wanted = select.value;
      void this.first();
    });
    byId("documents-page-size").addEventListener("change", () => void this.first());
    byId("documents-refresh").addEventListener("click", () => void this.page(this.token));
    byId("documents-next").addEventListener("click", () => {
      this.tokens.push(this.token);
      void this.page(this.next);
    });
    byId("documents-prev").addEventListener("click", () => void this.page(this.tokens.pop() ?? ""));
  }

  /** Opens the view on `name` (from the Indexes view). */
  select(name: string): void {
    this.wanted = name;
  }

  private get index(): string {
    return byId<HTMLSelectElement>("documents-index").value;
  }

  async load(): Promise<void> {
    const a = access();
    const select = byId<HTMLSelectElement>("documents-index");
    clear(byId("documents-table").querySelector("tbody")!);
    byId("document-detail").hidden = true;
    if (!usable(a)) return notice("documents-notice", "");
    if (!a.can.retrieve) {
      clear(select);
      return notice("documents-notice", lacks("list or inspect documents", "retrieve"));
    }
    try {
      const names = await indexNames();
      const keep = this.wanted || select.value;
      clear(select);
      for (const n of names) select.appendChild(h("option", { value: n }, n));
      if (names.includes(keep)) select.value = keep;
      await this.first();
    } catch (err) {
      this.showError(err);
    }
  }

  private async first(): Promise<void> {
    this.tokens = [];
    byId("document-detail").hidden = true;
    await this.page("");
  }

  private async page(token: string): Promise<void> {
    const index = this.index;
    if (!index) return;
    hideBanner();
    const tbody = byId("documents-table").querySelector("tbody")!;
    try {
      const pageSize = Number(byId<HTMLSelectElement>("documents-page-size").value);
      const r = await ingestion.listDocuments({ indexName: index, pageSize, pageToken: token });
      this.token = token;
      this.next = r.nextPageToken;
      clear(tbody);
      for (const d of r.documents) tbody.appendChild(this.row(d));
      const empty = r.documents.length === 0 && token === "";
      const cannotDelete = access().can.ingest ? "" : ` ${lacks("delete documents", "ingest")}`;
      notice("documents-notice", (empty ? TENANT_EMPTY : "") + cannotDelete);
      byId<HTMLButtonElement>("documents-prev").disabled = this.tokens.length === 0;
      byId<HTMLButtonElement>("documents-next").disabled = !this.next;
      const from = this.tokens.length * pageSize;
      byId("documents-page").textContent = r.documents.length
        ? `Documents ${from + 1}–${from + r.documents.length}${this.next ? "" : " (last page)"}`
        : "";
    } catch (err) {
      this.showError(err);
    }
  }

  private row(d: DocumentInfo): HTMLTableRowElement {
    const inspect = h("button", { type: "button", "data-action": "inspect" }, "Inspect");
    inspect.addEventListener("click", () => void this.inspect(d.documentId));
    const actions: HTMLElement[] = [inspect];
    if (access().can.ingest) {
      const del = h("button", { type: "button", "data-action": "delete" }, "Delete…");
      del.addEventListener("click", () => this.confirmDelete(d.documentId));
      actions.push(del);
    }
    return h(
      "tr",
      { "data-document": d.documentId },
      h("th", { scope: "row", class: "mono" }, d.documentId),
      h("td", {}, d.title || "–"),
      h("td", { class: "mono" }, d.sourceId),
      h("td", { class: "num" }, fmtNumber(d.chunkCount)),
      h("td", { class: "num" }, fmtNumber(d.sizeCharacters)),
      h("td", { class: "num" }, fmtNumber(d.version)),
      h("td", { class: "time" }, fmtTime(d.ingestTime)),
      h("td", { class: "actions" }, ...actions),
    );
  }

  private async inspect(id: string): Promise<void> {
    hideBanner();
    try {
      const r = await ingestion.getDocument({ indexName: this.index, documentId: id, includeChunks: true });
      renderDocument(r);
    } catch (err) {
      this.showError(err);
    }
  }

  /** The confirm step: the document's row says what will happen and waits. */
  private confirmDelete(id: string): void {
    const status = byId("documents-status");
    clear(status);
    const yes = h("button", { type: "button", "data-action": "confirm-delete" }, "Delete");
    const no = h("button", { type: "button", "data-action": "keep" }, "Keep");
    yes.addEventListener("click", () => void this.delete(id));
    no.addEventListener("click", () => clear(status));
    status.append(
      h("span", { "data-field": "confirm" }, `Delete ${id} from ${this.index}? This publishes a new version without it. `),
      yes,
      " ",
      no,
    );
    yes.focus();
  }

  private async delete(id: string): Promise<void> {
    const status = byId("documents-status");
    hideBanner();
    try {
      const r = await ingestion.deleteDocuments({ indexName: this.index, documentIds: [id] });
      status.textContent = `Deleted ${r.deleted} document (${id}); version ${r.publishedVersion} published.`;
      byId("document-detail").hidden = true;
      await this.page(this.token);
    } catch (err) {
      clear(status);
      this.showError(err);
    }
  }
}

function renderDocument(r: GetDocumentResponse): void {
  const d = r.document;
  if (!d) return;
  byId("document-detail").hidden = false;
  byId("h-document").textContent = d.title ? `${d.title} (${d.documentId})` : d.documentId;
  const body = byId("document-body");
  clear(body);
  const meta = Object.entries(d.metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  body.append(
    h(
      "dl",
      { class: "meta", "data-field": "document-info" },
      h("dt", {}, "Source"),
      h("dd", { class: "mono" }, d.sourceId),
      h("dt", {}, "Tenant"),
      h("dd", {}, d.tenant || "(untenanted)"),
      h("dt", {}, "Access list"),
      h(
        "dd",
        { "data-field": "acl" },
        d.acl.length
          ? h("ul", { class: "legs" }, ...d.acl.map((p) => h("li", { class: "mono" }, p)))
          : "everyone in the tenant",
      ),
      h("dt", {}, "Version"),
      h("dd", {}, `${fmtNumber(d.version)} · ${fmtTime(d.ingestTime)}`),
      h("dt", {}, "Size"),
      h("dd", {}, `${fmtNumber(d.sizeCharacters)} characters, ${d.chunkCount} chunks`),
      h("dt", {}, "Content hash"),
      h("dd", { class: "mono wrap" }, d.contentHash),
      h("dt", {}, "Metadata"),
      h(
        "dd",
        { "data-field": "metadata" },
        meta.length ? h("ul", { class: "legs" }, ...meta.map(([k, v]) => h("li", { class: "mono" }, `${k} = ${v}`))) : "–",
      ),
    ),
    h("h4", {}, `Chunks (${r.chunks.length}${r.chunksOmitted ? `, ${r.chunksOmitted} more not shown` : ""})`),
    h(
      "ol",
      { class: "chunks", start: "0" },
      ...r.chunks.map((c) =>
        h(
          "li",
          { "data-chunk": c.chunkId },
          h(
            "span",
            { class: "help block mono" },
            `${c.chunkId} · characters ${c.start}–${c.end}` + (c.section ? ` · ${c.section}` : ""),
          ),
          h("p", { class: "content" }, c.text),
        ),
      ),
    ),
  );
  byId("document-detail").scrollIntoView({ block: "nearest" });
}
