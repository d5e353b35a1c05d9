// The console's only way to the server: Connect clients over the generated
// stubs, with the API key from the header field as a Bearer token.
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ErrorInfoSchema } from "@gen/google/rpc/error_details_pb.js";
import {
  AgentService,
  IngestionManagerService,
  RetrieverService,
} from "@gen/groundwire/v1/index.js";

const KEY_STORAGE = "groundwire.console.apiKey";

let apiKey = "";

/** The key kept in memory, restored from this tab's session storage if it was kept there. */
export function loadKey(): { key: string; remembered: boolean } {
  try {
    const stored = sessionStorage.getItem(KEY_STORAGE);
    if (stored !== null) {
      apiKey = stored;
      return { key: stored, remembered: true };
    }
  } catch {
    // Storage disabled: memory only.
  }
  return { key: "", remembered: false };
}

export function setKey(key: string, remember: boolean): void {
  apiKey = key.trim();
  try {
    if (remember && apiKey) sessionStorage.setItem(KEY_STORAGE, apiKey);
    else sessionStorage.removeItem(KEY_STORAGE);
  } catch {
    // Storage disabled: memory only.
  }
}

export function hasKey(): boolean {
  return apiKey !== "";
}

const bearer: Interceptor = (next) => async (req) => {
  if (apiKey) req.header.set("authorization", `Bearer ${apiKey}`);
  return next(req);
};

const transport = createConnectTransport({
  // The console is served by the same HTTP port as the Connect services.
  baseUrl: window.location.origin,
  interceptors: [bearer],
});

export const ingestion: Client<typeof IngestionManagerService> = createClient(
  IngestionManagerService,
  transport,
);
export const retriever: Client<typeof RetrieverService> = createClient(RetrieverService, transport);
export const agents: Client<typeof AgentService> = createClient(AgentService, transport);

/** The names of the indexes the key sees (ListIndexes needs only a valid key). */
export async function indexNames(): Promise<string[]> {
  const names: string[] = [];
  let pageToken = "";
  do {
    const page = await ingestion.listIndexes({ pageSize: 100, pageToken });
    names.push(...page.indexes.map((i) => i.name));
    pageToken = page.nextPageToken;
  } while (pageToken && names.length < 1000);
  return names;
}

/** Whether the key's tenant has no published document in the index (the first
 * page of ListDocuments is empty: the condition of the CLI's notice). */
export async function tenantEmpty(indexName: string): Promise<boolean> {
  const r = await ingestion.listDocuments({ indexName, pageSize: 1 });
  return r.documents.length === 0;
}

/** The CLI's and MCP's wording (groundwire search: "no results (your key's tenant has
 * no documents in this index)"). */
export const TENANT_EMPTY = "Your key's tenant has no documents in this index.";

export interface ErrorView {
  status: string;
  reason: string;
  message: string;
}

/** UNAUTHENTICATED-style status name of a Connect code ("Unauthenticated" -> "UNAUTHENTICATED"). */
function statusName(code: Code): string {
  const name = Code[code] ?? "UNKNOWN";
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

/** What the error banner shows: the status, the ErrorInfo reason and the message. */
export function describeError(err: unknown): ErrorView {
  if (err instanceof DOMException && err.name === "AbortError") {
    return { status: "CANCELED", reason: "", message: "the call was stopped" };
  }
  const ce = ConnectError.from(err);
  const info = ce.findDetails(ErrorInfoSchema)[0];
  return {
    status: statusName(ce.code),
    reason: info?.reason ?? "",
    message: ce.rawMessage,
  };
}

/** One file's answer from the binary upload route (UpsertDocumentsResponse as JSON). */
export interface UploadResult {
  publishedVersion: string;
  upserted: number;
  unchanged: number;
  chunksWritten: number;
  truncatedChunks: number;
  failures: { documentId: string; reason: string; message?: string }[];
}

/** A refusal of the upload route: its JSON error, or what the browser saw. */
export class UploadError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** The upload answer's fields as the UploadResult (proto3 JSON names). */
function uploadResult(body: Record<string, unknown>): UploadResult {
  return {
    publishedVersion: String(body["publishedVersion"] ?? ""),
    upserted: Number(body["upserted"] ?? 0),
    unchanged: Number(body["unchanged"] ?? 0),
    chunksWritten: Number(body["chunksWritten"] ?? 0),
    truncatedChunks: Number(body["truncatedChunks"] ?? 0),
    failures: (body["failures"] as UploadResult["failures"] | undefined) ?? [],
  };
}

function uploadError(status: number, body: Record<string, unknown>, fallback: string): UploadError {
  return new UploadError(
    status,
    String(body["code"] ?? `HTTP ${status}`),
    String(body["reason"] ?? ""),
    String(body["message"] ?? fallback),
  );
}

function jsonLines(text: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // A line still arriving.
    }
  }
  return out;
}

/** Sends one file's bytes to `POST /api/rag/indexes/{index}/files?name=...`
 * (XMLHttpRequest, so its upload progress can be shown). The answer is asked
 * for as it goes (application/x-ndjson): once the server begins the push it
 * names the push's operation (`onOperation`, to watch it), then its result. */
export function uploadFile(
  indexName: string,
  file: File,
  mediaType: string,
  onProgress: (sent: number, total: number) => void,
  onOperation: (operationId: string) => void = () => undefined,
): Promise<UploadResult> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    const url =
      `/api/rag/indexes/${encodeURIComponent(indexName)}/files?name=${encodeURIComponent(file.name)}`;
    xhr.open("POST", url);
    if (apiKey) xhr.setRequestHeader("Authorization", `Bearer ${apiKey}`);
    xhr.setRequestHeader("Content-Type", mediaType || "application/octet-stream");
    xhr.setRequestHeader("Accept", "application/x-ndjson, application/json");
    xhr.responseType = "text";
    let announced = false;
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onprogress = () => {
      const first = jsonLines(xhr.responseText)[0];
      if (!announced && typeof first?.["operationId"] === "string") {
        announced = true;
        onOperation(first["operationId"]);
      }
    };
    xhr.onload = () => {
      if ((xhr.getResponseHeader("Content-Type") ?? "").startsWith("application/x-ndjson")) {
        const last = jsonLines(xhr.responseText).at(-1) ?? {};
        const result = last["result"] as Record<string, unknown> | undefined;
        if (result) resolve(uploadResult(result));
        else reject(uploadError(xhr.status, (last["error"] as Record<string, unknown>) ?? {}, "no answer"));
        return;
      }
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(xhr.responseText || "{}") as Record<string, unknown>;
      } catch {
        // Not JSON (a proxy's page): the status says enough.
      }
      if (xhr.status === 200) resolve(uploadResult(body));
      else reject(uploadError(xhr.status, body, xhr.statusText));
    };
    // The server may answer a refusal (413) and close before the body is sent.
    xhr.onerror = () =>
      reject(new UploadError(0, "NETWORK_ERROR", "", "the connection closed before an answer (too large?)"));
    xhr.onabort = () => reject(new UploadError(0, "CANCELED", "", "the upload was stopped"));
    xhr.send(file);
  });
}
