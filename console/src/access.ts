// What the API key may do. No RPC describes a key, so the console asks the
// server the cheapest question each permission governs and reads the answer:
// PERMISSION_DENIED means the key lacks it, anything else (a result, or a
// refusal of the question itself such as INVALID_ARGUMENT) means it has it.
// The server's interceptor checks the permission before it reads the request.
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@gen/google/rpc/error_details_pb.js";
import { agents, describeError, hasKey, ingestion } from "./api.js";

export type Permission = "retrieve" | "execute" | "ingest" | "manage";
export const PERMISSIONS: Permission[] = ["retrieve", "execute", "ingest", "manage"];

export interface Access {
  /** disabled: the server answers without a key; missing: it needs one and none
   * is set; refused: UNAUTHENTICATED for the key; key: the key is accepted. */
  state: "disabled" | "missing" | "refused" | "key" | "unknown";
  can: Record<Permission, boolean>;
  /** The first index the key sees ("" when none), the one the probes ask about. */
  firstIndex: string;
  /** The probe's failure (UNAUTHENTICATED, or the server unreachable). */
  error?: unknown;
}

const ALL: Record<Permission, boolean> = { retrieve: true, execute: true, ingest: true, manage: true };
const NONE: Record<Permission, boolean> = { retrieve: false, execute: false, ingest: false, manage: false };

let current: Access = { state: "unknown", can: { ...ALL }, firstIndex: "" };

export function access(): Access {
  return current;
}

/** PERMISSION_DENIED for lacking `perm` (ErrorInfo metadata `permission` names the
 * missing one; another, such as `operator` for another tenant's index, is not this). */
function denied(err: unknown, perm: Permission): boolean {
  const ce = ConnectError.from(err);
  if (ce.code !== Code.PermissionDenied) return false;
  const missing = ce.findDetails(ErrorInfoSchema)[0]?.metadata["permission"];
  return missing === undefined || missing === perm;
}

/** Whether the key holds `perm`: true unless the call is refused for lacking it. */
async function permitted(perm: Permission, call: () => Promise<unknown>): Promise<boolean> {
  try {
    await call();
    return true;
  } catch (err) {
    return !denied(err, perm);
  }
}

/** Asks the server what the current key may do (ListIndexes needs only a valid key). */
export async function probeAccess(): Promise<Access> {
  let firstIndex = "";
  try {
    const r = await ingestion.listIndexes({ pageSize: 1 });
    firstIndex = r.indexes[0]?.name ?? "";
  } catch (err) {
    if (ConnectError.from(err).code === Code.Unauthenticated) {
      current = { state: hasKey() ? "refused" : "missing", can: { ...NONE }, firstIndex, error: err };
    } else {
      current = { state: "unknown", can: { ...ALL }, firstIndex, error: err };
    }
    return current;
  }
  if (!hasKey()) {
    // Answered without a key: the server has authentication disabled.
    current = { state: "disabled", can: { ...ALL }, firstIndex };
    return current;
  }
  const indexName = firstIndex;
  const [retrieve, manage, ingest, execute] = await Promise.all([
    permitted("retrieve", () => ingestion.listDocuments({ indexName, pageSize: 1 })),
    permitted("manage", () => ingestion.getIndexStatus({ indexName })),
    // No ids: INVALID_ARGUMENT (1 to 1,000 ids) once the permission is checked; nothing
    // is deleted and, refused as malformed, it is not recorded as a push.
    permitted("ingest", () => ingestion.deleteDocuments({ indexName, documentIds: [] })),
    permitted("execute", () => agents.listAgents({ pageSize: 1 })),
  ]);
  current = { state: "key", can: { retrieve, manage, ingest, execute }, firstIndex };
  return current;
}

/** "retrieve and ingest" */
export function listed(perms: Permission[]): string {
  if (perms.length <= 1) return perms.join("");
  return `${perms.slice(0, -1).join(", ")} and ${perms[perms.length - 1]}`;
}

/** What the key field says about the key. */
export function keyStatus(a: Access): string {
  switch (a.state) {
    case "disabled":
      return "auth disabled: this server needs no key";
    case "missing":
      return "this server needs an API key";
    case "refused": {
      const e = describeError(a.error);
      return `key refused (${e.reason || e.status})`;
    }
    case "key": {
      const yes = PERMISSIONS.filter((p) => a.can[p]);
      const no = PERMISSIONS.filter((p) => !a.can[p]);
      return `key accepted · can ${yes.length ? listed(yes) : "list indexes only"}` +
        (no.length ? ` · lacks ${listed(no)}` : "");
    }
    default:
      return "";
  }
}

/** Whether the views can call anything at all (a key the server accepts, or none needed). */
export function usable(a: Access): boolean {
  return a.state !== "missing" && a.state !== "refused";
}

/** Shows `text` in a view's notice paragraph, or hides it when empty. */
export function notice(id: string, text: string): void {
  const el = document.getElementById(id);
  if (!el) return;
  el.textContent = text;
  el.hidden = text === "";
}

/** The sentence a view shows when the key lacks what it needs. */
export function lacks(what: string, perm: Permission, rest = ""): string {
  return `This key cannot ${what} (it lacks ${perm})${rest ? `; ${rest}` : ""}.`;
}
