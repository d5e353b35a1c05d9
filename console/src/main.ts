// groundwire console: routes (/console/indexes, /console/search,
// /console/documents, /console/agents), the API-key field (and what the key
// may do) and the error banner.
import "./styles.css";
import { keyStatus, probeAccess } from "./access.js";
import { describeError, loadKey, setKey } from "./api.js";
import { AgentsView } from "./agents.js";
import { byId } from "./dom.js";
import { DocumentsView } from "./documents.js";
import { IndexesView } from "./indexes.js";
import { SearchView } from "./search.js";
import { finish, providers, start } from "./signin.js";

type View = "indexes" | "search" | "documents" | "agents";
const VIEWS: View[] = ["indexes", "search", "documents", "agents"];
const BASE = "/console";

function showError(err: unknown): void {
  const e = describeError(err);
  byId("error-status").textContent = e.status;
  byId("error-reason").textContent = e.reason ? `reason ${e.reason}` : "";
  byId("error-message").textContent = e.message;
  byId("error-banner").hidden = false;
}

function hideError(): void {
  byId("error-banner").hidden = true;
}

const documents = new DocumentsView(showError);
const indexes = new IndexesView(showError, (name) => {
  documents.select(name);
  navigate("documents");
});
const search = new SearchView(showError);
const agentsView = new AgentsView(showError);

function viewFromPath(path: string): View {
  const rest = path.startsWith(BASE) ? path.slice(BASE.length).replace(/^\/+|\/+$/g, "") : "";
  return (VIEWS as string[]).includes(rest) ? (rest as View) : "indexes";
}

async function show(view: View): Promise<void> {
  for (const v of VIEWS) {
    byId(`view-${v}`).hidden = v !== view;
    const link = document.querySelector<HTMLAnchorElement>(`a[data-view="${v}"]`)!;
    if (v === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${view[0]!.toUpperCase()}${view.slice(1)} · groundwire console`;
  await load(view);
}

let accessChecked: Promise<void> | null = null;

/** Asks the server what the key may do and says it next to the key field. */
async function checkAccess(): Promise<void> {
  const a = await probeAccess();
  byId("key-status").textContent = keyStatus(a);
  byId<HTMLInputElement>("api-key").placeholder = a.state === "disabled" ? "none (auth disabled)" : "gw_…";
  if (a.error) showError(a.error);
}

async function load(view: View): Promise<void> {
  accessChecked ??= checkAccess();
  await accessChecked;
  if (view === "indexes") await indexes.refresh();
  else if (view === "search") await search.load();
  else if (view === "documents") await documents.load();
  else await agentsView.refresh();
}

function navigate(view: View): void {
  history.pushState(null, "", `${BASE}/${view}`);
  hideError();
  void show(view);
  byId("main").focus();
}

for (const link of document.querySelectorAll<HTMLAnchorElement>("a[data-view]")) {
  link.addEventListener("click", (e) => {
    if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    navigate(link.dataset["view"] as View);
  });
}
window.addEventListener("popstate", () => void show(viewFromPath(location.pathname)));

byId("error-dismiss").addEventListener("click", hideError);

const keyInput = byId<HTMLInputElement>("api-key");
const remember = byId<HTMLInputElement>("key-remember");
const saved = loadKey();
keyInput.value = saved.key;
remember.checked = saved.remembered;
function keyChanged(): void {
  setKey(keyInput.value, remember.checked);
  hideError();
  accessChecked = null;
  void load(viewFromPath(location.pathname));
}
keyInput.addEventListener("change", keyChanged);
remember.addEventListener("change", keyChanged);
byId<HTMLFormElement>("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  keyChanged();
});

/** Completes a sign-in the provider sent back here, then offers each provider's button. */
async function signIn(): Promise<void> {
  try {
    const done = await finish();
    if (done !== null) {
      keyInput.value = done.token;
      setKey(done.token, remember.checked);
    }
  } catch (e) {
    byId("key-status").textContent = e instanceof Error ? e.message : "sign-in failed";
  }
  const box = byId("sign-in");
  for (const p of await providers()) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = `Sign in with ${p.id}`;
    button.addEventListener("click", () => void start(p));
    box.append(button);
  }
  box.hidden = box.childElementCount === 0;
}

void signIn().then(() => show(viewFromPath(location.pathname)));
