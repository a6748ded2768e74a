// Calls to the server's JSON API. The browser is signed in by an HttpOnly cookie.

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

export async function api<T>(path: string, init: RequestInit & { json?: unknown } = {}): Promise<T> {
  const { json, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (json !== undefined) headers.set("content-type", "application/json");
  let resp: Response;
  try {
    resp = await fetch(path, { ...rest, headers, credentials: "same-origin", body: json !== undefined ? JSON.stringify(json) : rest.body });
  } catch {
    throw new ApiError(0, "offline", "cannot reach the Drover server");
  }
  if (!resp.ok) {
    let code = "http_" + resp.status;
    let message = `the server answered ${resp.status}`;
    try {
      const body = await resp.json();
      if (typeof body.code === "string") code = body.code;
      if (typeof body.error === "string") message = body.error;
    } catch {
      /* not JSON */
    }
    if (resp.status === 401) notifySignedOut(code);
    throw new ApiError(resp.status, code, message);
  }
  if (resp.status === 204) return undefined as T;
  return (await resp.json()) as T;
}

type SignedOutListener = (code: string) => void;
const signedOut = new Set<SignedOutListener>();
export function onSignedOut(f: SignedOutListener): () => void {
  signedOut.add(f);
  return () => signedOut.delete(f);
}
function notifySignedOut(code: string) {
  for (const f of signedOut) f(code);
}

export const enc = encodeURIComponent;

/** What to show a person for a failed call: the server's message, or the error's. */
export const errorText = (e: unknown) => (e instanceof ApiError ? e.message : String(e));
