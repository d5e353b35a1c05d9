// groundwire console: routes (/console/indexes, /console/search,
// /console/agents), the API-key field and the error banner.
import "./styles.css";
import { describeError, ingestion, loadKey, setKey } from "./api.js";
import { AgentsView } from "./agents.js";
import { byId } from "./dom.js";
import { IndexesView } from "./indexes.js";
import { SearchView } from "./search.js";

type View = "indexes" | "search" | "agents";
const VIEWS: View[] = ["indexes", "search", "agents"];
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

const indexes = new IndexesView(showError);
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

async function load(view: View): Promise<void> {
  if (view === "indexes") await indexes.refresh();
  else if (view === "search") {
    // The index choices come from the same ListIndexes call as the Indexes view.
    try {
      const r = await ingestion.listIndexes({ pageSize: 100 });
      search.setIndexes(r.indexes.map((i) => i.name));
    } catch (err) {
      showError(err);
    }
  } else await agentsView.refresh();
}

for (const link of document.querySelectorAll<HTMLAnchorElement>("a[data-view]")) {
  link.addEventListener("click", (e) => {
    if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    history.pushState(null, "", link.href);
    hideError();
    void show(link.dataset["view"] as View);
    byId("main").focus();
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
  void load(viewFromPath(location.pathname));
}
keyInput.addEventListener("change", keyChanged);
remember.addEventListener("change", keyChanged);
byId<HTMLFormElement>("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  keyChanged();
});

void show(viewFromPath(location.pathname));
