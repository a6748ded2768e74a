// A one-time sign-in link (`drover up`, `drover ui`): /login#<code>. The code rides in
// the fragment, which the browser never sends, so it stays out of proxy and server logs;
// this page posts it. A browser already signed in is asked first, so nobody can sign it
// in as someone else behind its back (login CSRF).

import { useEffect, useState } from "preact/hooks";
import { api, errorText } from "../api";
import type { Me } from "../types";

type Step = { kind: "checking" } | { kind: "ask"; me: Me } | { kind: "signing-in" } | { kind: "failed"; text: string };

export function LinkSignInPage() {
  const [code] = useState(() => window.location.hash.slice(1));
  const [step, setStep] = useState<Step>({ kind: "checking" });
  const redeem = async () => {
    setStep({ kind: "signing-in" });
    try {
      await api("/api/v1/login/link", { method: "POST", json: { code } });
      window.location.replace("/sessions");
    } catch (e) {
      setStep({ kind: "failed", text: errorText(e) });
    }
  };
  useEffect(() => {
    // The code leaves the address bar (and the history) at once.
    history.replaceState(null, "", "/login");
    if (!code) {
      setStep({ kind: "failed", text: "This is not a sign-in link: run drover ui for a fresh one." });
      return;
    }
    fetch("/api/v1/me", { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : null))
      .then((me: Me | null) => (me ? setStep({ kind: "ask", me }) : redeem()), () => redeem());
  }, []);
  return (
    <main class="message-page">
      <h1>Drover</h1>
      {(step.kind === "checking" || step.kind === "signing-in") && <p>Signing in…</p>}
      {step.kind === "ask" && (
        <>
          <p>
            This browser is signed in as <strong>{step.me.name}</strong>. The link you opened signs it in as the member it was made for instead.
          </p>
          <div class="send-row">
            <button class="button primary" type="button" onClick={redeem}>
              Sign in with the link
            </button>
            <a class="button" href="/sessions">
              Stay signed in as {step.me.name}
            </a>
          </div>
        </>
      )}
      {step.kind === "failed" && (
        <p class="error" role="alert">
          {step.text}
        </p>
      )}
    </main>
  );
}
