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
