// Sign in with an identity provider: OAuth 2.0 authorization code with PKCE
// (RFC 7636, S256). The server lists the providers the console may use
// (/console/sign-in.json: public endpoints and public client ids, nothing
// secret); the person signs in at the provider, comes back here with a code,
// and the console exchanges it (with the verifier that never left this tab)
// for an access token, which it then sends like an API key.

export interface Provider {
  id: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  clientId: string;
  scope: string;
}

interface Pending {
  verifier: string;
  state: string;
  provider: Provider;
  back: string;
}

const PENDING = "groundwire.console.signIn";

function base64url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function random(bytes: number): string {
  const a = new Uint8Array(bytes);
  crypto.getRandomValues(a);
  return base64url(a);
}

/** The console's own URL, registered at the provider as the redirect URI. */
function redirectUri(): string {
  return `${location.origin}/console/`;
}

/** The providers the server offers ([] when none, or on any failure). */
export async function providers(): Promise<Provider[]> {
  try {
    const r = await fetch("/console/sign-in.json", { headers: { accept: "application/json" } });
    if (!r.ok) return [];
    const body: unknown = await r.json();
    const list = (body as { providers?: unknown }).providers;
    return Array.isArray(list) ? (list as Provider[]) : [];
  } catch {
    return [];
  }
}

/** Sends the person to the provider's sign-in page. */
export async function start(p: Provider): Promise<void> {
  const verifier = random(32);
  const challenge = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)),
  );
  const state = random(16);
  const pending: Pending = { verifier, state, provider: p, back: location.pathname };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const url = new URL(p.authorizationEndpoint);
  url.search = new URLSearchParams({
    response_type: "code",
    client_id: p.clientId,
    redirect_uri: redirectUri(),
    scope: p.scope,
    state,
    code_challenge: base64url(challenge),
    code_challenge_method: "S256",
  }).toString();
  location.assign(url.toString());
}

/** When the provider sent the person back with a code: the access token (and
 * the view they started from); null when no sign-in is under way. Throws with
 * a short reason when the sign-in failed. */
export async function finish(): Promise<{ token: string; back: string } | null> {
  const params = new URLSearchParams(location.search);
  const code = params.get("code");
  const error = params.get("error");
  let raw: string | null = null;
  try {
    raw = sessionStorage.getItem(PENDING);
  } catch {
    return null;
  }
  if (raw === null || (code === null && error === null)) return null;
  sessionStorage.removeItem(PENDING);
  const pending = JSON.parse(raw) as Pending;
  // The code and state leave the address bar and the history at once.
  history.replaceState(null, "", pending.back.startsWith("/console") ? pending.back : "/console/");
  if (error !== null) throw new Error(`sign-in refused by the provider (${error.slice(0, 64)})`);
  if (params.get("state") !== pending.state) throw new Error("sign-in failed (state mismatch)");
  const r = await fetch(pending.provider.tokenEndpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: code!,
      redirect_uri: redirectUri(),
      client_id: pending.provider.clientId,
      code_verifier: pending.verifier,
    }),
  });
  if (!r.ok) throw new Error(`sign-in failed (the provider answered ${r.status})`);
  const body = (await r.json()) as { access_token?: unknown };
  if (typeof body.access_token !== "string") throw new Error("sign-in failed (no access token)");
  return { token: body.access_token, back: pending.back };
}
