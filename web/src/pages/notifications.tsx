// Notifications (each member's own): turning Web Push on and off in this browser, the
// member's browsers, what they are told of and when, and a test push.

import { useEffect, useState } from "preact/hooks";
import { api, errorText } from "../api";
import { ago, when } from "../format";
import type { components } from "../api.gen";

type Choices = components["schemas"]["NotificationChoices"];
type Browser = components["schemas"]["PushSubscriptionView"];
type PushKey = components["schemas"]["PushKey"];

const EVENTS: [string, string][] = [
  ["permission", "A run waits for a call to be approved"],
  ["question", "A run asks a question"],
  ["idle", "A run waits for its next instruction"],
  ["finished", "A run finished"],
  ["failed", "A run failed"],
  ["lost", "A run was lost"],
  ["spend_cap", "A spend cap was reached"],
];

const supported = () => "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;

/** base64url (the server's VAPID key) to bytes, for `applicationServerKey`. */
function bytes(b64url: string): Uint8Array<ArrayBuffer> {
  const s = atob(b64url.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((b64url.length + 3) % 4));
  const out = new Uint8Array(new ArrayBuffer(s.length));
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

async function currentSubscription(): Promise<PushSubscription | null> {
  if (!supported()) return null;
  const reg = await navigator.serviceWorker.getRegistration();
  return (await reg?.pushManager.getSubscription()) ?? null;
}

function ThisBrowser({ browsers, reload }: { browsers: Browser[] | null; reload: () => void }) {
  const [endpoint, setEndpoint] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const refresh = () => currentSubscription().then((s) => setEndpoint(s?.endpoint ?? null), () => setEndpoint(null));
  useEffect(() => {
    refresh();
  }, []);
  const registered = endpoint != null && (browsers ?? []).some((b) => b.endpoint === endpoint);

  const act = async (f: () => Promise<string>) => {
    setBusy(true);
    setError(null);
    setStatus(null);
    try {
      setStatus(await f());
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
      refresh();
      reload();
    }
  };
  const enable = () =>
    act(async () => {
      const permission = await Notification.requestPermission();
      if (permission !== "granted") throw new Error("Notifications are blocked for this site: allow them in the browser's site settings.");
      const reg = await navigator.serviceWorker.ready;
      const { public_key } = await api<PushKey>("/api/v1/push/key");
      const sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: bytes(public_key) });
      const j = sub.toJSON();
      try {
        await api("/api/v1/push/subscriptions", { method: "POST", json: { endpoint: j.endpoint, p256dh: j.keys?.p256dh, auth: j.keys?.auth } });
      } catch (e) {
        await sub.unsubscribe().catch(() => {});
        throw e;
      }
      return "This browser will be told.";
    });
  const disable = () =>
    act(async () => {
      const sub = await currentSubscription();
      if (sub) {
        await api("/api/v1/push/subscriptions", { method: "DELETE", json: { subscription: sub.endpoint } }).catch((e) => {
          if (!(e && typeof e === "object" && "status" in e && e.status === 404)) throw e;
        });
        await sub.unsubscribe();
      }
      return "This browser will not be told.";
    });
  const test = () =>
    act(async () => {
      const r = await api<{ queued: number }>("/api/v1/push/test", { method: "POST", json: {} });
      return r.queued === 1 ? "A test notification was sent to 1 browser." : `A test notification was sent to ${r.queued} browsers.`;
    });

  return (
    <div class="panel notify-browser">
      {!supported() ? (
        <p class="muted">This browser cannot receive push notifications.</p>
      ) : (
        <p class="muted" data-testid="this-browser">
          {registered ? "This browser is told." : "This browser is not told."}
          {Notification.permission === "denied" && " Notifications are blocked for this site in the browser's settings."}
        </p>
      )}
      <div class="send-row">
        {supported() && !registered && (
          <button class="button primary" disabled={busy} onClick={enable}>
            Enable on this browser
          </button>
        )}
        {supported() && endpoint != null && (
          <button class="button" disabled={busy} onClick={disable}>
            Disable on this browser
          </button>
        )}
        <button class="button" disabled={busy} onClick={test}>
          Send a test
        </button>
      </div>
      {status && (
        <p class="ok-text" role="status">
          {status}
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

function Browsers({ browsers, reload }: { browsers: Browser[] | null; reload: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const remove = async (b: Browser) => {
    try {
      await api("/api/v1/push/subscriptions", { method: "DELETE", json: { subscription: b.id } });
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
    reload();
  };
  return (
    <>
      <h2>Your browsers</h2>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {browsers?.length === 0 && <p class="empty">No browser is told yet.</p>}
      {browsers && browsers.length > 0 && (
        <ul class="notify-browsers" aria-label="Your browsers">
          {browsers.map((b) => (
            <li key={b.id} data-browser={b.id}>
              <span class="notify-endpoint" title={b.endpoint}>
                {new URL(b.endpoint).host}
              </span>
              <span class="muted" title={when(b.created_at)}>
                added {ago(b.created_at)}
              </span>
              <button class="button" onClick={() => remove(b)}>
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

function ChoicesForm() {
  const [events, setEvents] = useState<string[] | null>(null);
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const [zone, setZone] = useState("");
  const [cooldown, setCooldown] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  const show = (c: Choices) => {
    setEvents(c.events);
    const [f, t] = (c.quiet ?? "").split("-");
    setFrom(f ?? "");
    setTo(t ?? "");
    setZone(c.zone);
    setCooldown(String(c.cooldown_secs));
  };
  useEffect(() => {
    api<Choices>("/api/v1/me/notifications").then(show, (e) => setError(errorText(e)));
  }, []);
  const save = async (e: Event) => {
    e.preventDefault();
    setSaved(false);
    if (!from !== !to) {
      setError("Quiet hours need both a start and an end (or neither).");
      return;
    }
    const secs = Number(cooldown);
    if (!Number.isInteger(secs) || secs < 0) {
      setError("The cool-down is a whole number of seconds.");
      return;
    }
    try {
      const c = await api<Choices>("/api/v1/me/notifications", {
        method: "PUT",
        json: { events: events ?? [], quiet: from && to ? `${from}-${to}` : null, zone: zone.trim(), cooldown_secs: secs },
      });
      show(c);
      setError(null);
      setSaved(true);
    } catch (err) {
      setError(errorText(err));
    }
  };
  if (events == null)
    return error ? (
      <p class="error" role="alert">
        {error}
      </p>
    ) : (
      <p class="muted">Loading…</p>
    );
  const here = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return (
    <form class="panel new-task notify-choices" aria-label="Notification choices" onSubmit={save}>
      <fieldset class="events">
        <legend>Tell me when</legend>
        {EVENTS.map(([k, label]) => (
          <label key={k} class="check">
            <input
              type="checkbox"
              name={k}
              checked={events.includes(k)}
              onChange={(e) => setEvents((old) => ((e.target as HTMLInputElement).checked ? [...(old ?? []), k] : (old ?? []).filter((o) => o !== k)))}
            />
            {label}
          </label>
        ))}
      </fieldset>
      <fieldset class="notify-quiet">
        <legend>Quiet hours (nothing is pushed)</legend>
        <label>
          From
          <input type="time" class="search" value={from} onInput={(e) => setFrom((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          To
          <input type="time" class="search" value={to} onInput={(e) => setTo((e.target as HTMLInputElement).value)} />
        </label>
      </fieldset>
      <label>
        Time zone
        <input class="search" required maxLength={64} value={zone} onInput={(e) => setZone((e.target as HTMLInputElement).value)} />
      </label>
      {here && here !== zone && (
        <p class="muted">
          This browser is in <code>{here}</code>.{" "}
          <a
            href="#"
            onClick={(e) => {
              e.preventDefault();
              setZone(here);
            }}
          >
            Use it
          </a>
        </p>
      )}
      <label>
        Cool-down (seconds between notices about one run)
        <input class="search" type="number" min={0} step={1} required value={cooldown} onInput={(e) => setCooldown((e.target as HTMLInputElement).value)} />
      </label>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {saved && (
        <p class="ok-text" role="status">
          Saved.
        </p>
      )}
      <div class="send-row">
        <button class="button primary" type="submit">
          Save
        </button>
      </div>
    </form>
  );
}

export function NotificationsPage() {
  const [browsers, setBrowsers] = useState<Browser[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<Browser[]>("/api/v1/push/subscriptions").then(
      (l) => {
        setBrowsers(l);
        setError(null);
      },
      (e) => setError(errorText(e)),
    );
  useEffect(() => {
    load();
  }, []);
  return (
    <section class="page notifications">
      <header class="page-header">
        <h1>Notifications</h1>
      </header>
      <p class="muted">
        Drover can tell this browser when a run needs you, even with no Drover page open; a held call can be approved from the notification.
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <ThisBrowser browsers={browsers} reload={load} />
      <Browsers browsers={browsers} reload={load} />
      <h2>What you are told</h2>
      <ChoicesForm />
    </section>
  );
}
