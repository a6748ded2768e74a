// Webhooks (owners and admins): the workspace's endpoints, adding one (its secret is
// shown once), rotating a secret, re-enabling a disabled endpoint, removing one, and
// each endpoint's delivery log with Redeliver.

import { useEffect, useState } from "preact/hooks";
import { api, enc, errorText } from "../api";
import { ago, when } from "../format";

interface Webhook {
  id: string;
  url: string;
  events: string[];
  disabled_reason: string | null;
  signing_secrets: number;
  created_by: string;
  created_at: string;
}

interface Delivery {
  id: string;
  event_type: string;
  state: "pending" | "delivered" | "failed";
  attempts: number;
  next_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  delivered_at: string | null;
}

const EVENT_TYPES = [
  "session.started",
  "session.ended",
  "session.lost",
  "task.stage_advanced",
  "task.input_requested",
  "task.finished",
  "spend.cap_reached",
  "task.needs_person",
];


function Deliveries({ hook }: { hook: Webhook }) {
  const [list, setList] = useState<Delivery[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<Delivery[]>(`/api/v1/webhooks/${enc(hook.id)}/deliveries`).then(
      (l) => {
        setList(l);
        setError(null);
      },
      (e) => setError(errorText(e)),
    );
  useEffect(() => {
    load();
    const t = window.setInterval(load, 3000);
    return () => window.clearInterval(t);
  }, [hook.id]);
  const redeliver = async (msg: string) => {
    try {
      await api(`/api/v1/webhooks/${enc(hook.id)}/deliveries/${enc(msg)}/redeliver`, { method: "POST", json: {} });
      setError(null);
      load();
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <div class="deliveries">
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {list?.length === 0 && <p class="muted">No deliveries yet.</p>}
      {list && list.length > 0 && (
        <div class="table-wrap">
          <table aria-label={`Deliveries to ${hook.url}`}>
            <thead>
              <tr>
                <th>Message</th>
                <th>Event</th>
                <th>State</th>
                <th>Attempts</th>
                <th>Last answer</th>
                <th>Queued</th>
                <th>Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((d) => (
                <tr key={d.id} data-delivery={d.id}>
                  <td data-label="Message">
                    <code>{d.id}</code>
                  </td>
                  <td data-label="Event">{d.event_type}</td>
                  <td data-label="State">
                    <span
                      class={`badge ${d.state === "delivered" ? "ok" : d.state === "failed" ? "warning" : "info"}`}
                      title={d.state === "pending" && d.next_attempt_at ? `next attempt ${when(d.next_attempt_at)}` : undefined}
                    >
                      {d.state}
                    </span>
                  </td>
                  <td data-label="Attempts">{d.attempts}</td>
                  <td data-label="Last answer">{d.last_status ?? d.last_error ?? "—"}</td>
                  <td data-label="Queued" title={when(d.created_at)}>
                    {ago(d.created_at)}
                  </td>
                  <td data-label="Actions">
                    <button class="button" onClick={() => redeliver(d.id)}>
                      Redeliver
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

function AddForm({ onAdded }: { onAdded: (secret: string, url: string) => void }) {
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<string[]>(["session.lost", "task.input_requested"]);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    try {
      const made = await api<{ secret: string }>("/api/v1/webhooks", { method: "POST", json: { url, events } });
      setUrl("");
      setError(null);
      onAdded(made.secret, url);
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form class="panel new-task" aria-label="Add a webhook" onSubmit={submit}>
      <label>
        Endpoint URL
        <input class="search" required maxLength={2048} value={url} onInput={(e) => setUrl((e.target as HTMLInputElement).value)} />
      </label>
      <fieldset class="events">
        <legend>Events</legend>
        {EVENT_TYPES.map((t) => (
          <label key={t} class="check">
            <input
              type="checkbox"
              checked={events.includes(t)}
              onChange={(e) => setEvents((old) => ((e.target as HTMLInputElement).checked ? [...old, t] : old.filter((o) => o !== t)))}
            />
            {t}
          </label>
        ))}
      </fieldset>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div class="send-row">
        <button class="button primary" type="submit">
          Add webhook
        </button>
      </div>
    </form>
  );
}

export function WebhooksPage() {
  const [hooks, setHooks] = useState<Webhook[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [secret, setSecret] = useState<{ secret: string; url: string } | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const load = () => api<Webhook[]>("/api/v1/webhooks").then(setHooks, (e) => setError(errorText(e)));
  useEffect(() => {
    load();
  }, []);
  const act = async (hook: Webhook, action: "rotate" | "enable" | "remove") => {
    try {
      if (action === "remove") {
        if (!window.confirm(`Remove the webhook to ${hook.url} and its delivery log?`)) return;
        await api(`/api/v1/webhooks/${enc(hook.id)}`, { method: "DELETE" });
      } else {
        const r = await api<{ secret?: string }>(`/api/v1/webhooks/${enc(hook.id)}/${action}`, { method: "POST", json: {} });
        if (r.secret) setSecret({ secret: r.secret, url: hook.url });
      }
      setError(null);
      load();
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <section class="page">
      <header class="page-header">
        <h1>Webhooks</h1>
      </header>
      <p class="muted">
        Deliveries are signed the Standard Webhooks way (<code>webhook-id</code>, <code>webhook-timestamp</code>,{" "}
        <code>webhook-signature</code>), retried with backoff until delivered, and a 410 answer disables the endpoint.
      </p>
      {secret && (
        <div class="banner info" role="status" data-testid="secret">
          Signing secret for {secret.url} (shown once; give it to the receiver): <code>{secret.secret}</code>
        </div>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <AddForm
        onAdded={(s, url) => {
          setSecret({ secret: s, url });
          load();
        }}
      />
      {hooks?.length === 0 && <p class="empty">No webhooks yet.</p>}
      {(hooks ?? []).map((h) => (
        <div class="panel webhook" key={h.id} data-webhook={h.id}>
          <div class="send-row">
            <strong class="url">{h.url}</strong>
            {h.disabled_reason ? (
              <span class="badge warning" title={h.disabled_reason}>
                disabled
              </span>
            ) : (
              <span class="badge ok">enabled</span>
            )}
            {h.signing_secrets > 1 && <span class="badge info" title="The previous secret still signs for a day">rotating</span>}
          </div>
          <p class="muted">
            {h.events.join(", ")} · added by {h.created_by} {ago(h.created_at)}
          </p>
          <div class="send-row">
            <button class="button" onClick={() => setOpen(open === h.id ? null : h.id)}>
              {open === h.id ? "Hide deliveries" : "Deliveries"}
            </button>
            <button class="button" onClick={() => act(h, "rotate")}>
              Rotate secret
            </button>
            {h.disabled_reason && (
              <button class="button" onClick={() => act(h, "enable")}>
                Enable
              </button>
            )}
            <button class="button danger" onClick={() => act(h, "remove")}>
              Remove
            </button>
          </div>
          {open === h.id && <Deliveries hook={h} />}
        </div>
      ))}
    </section>
  );
}
