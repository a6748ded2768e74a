// Needs you: what runs wait on a person for (held tool calls, finished turns, guesses
// from a still screen, a task's open questions), each a card with one-tap decisions. The
// card is shared with a session's page, which shows what its own run waits on.

import { Fragment } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, enc, errorText } from "../api";
import { ago, when } from "../format";
import { subscribe } from "../live";
import type { DecideBody, Inbox, InboxItem } from "../types";

/** Re-renders every 30 s, so "how long ago" stays true while a page sits open. */
function useTick(ms = 30_000) {
  const [, tick] = useState(0);
  useEffect(() => {
    const t = window.setInterval(() => tick((n) => n + 1), ms);
    return () => window.clearInterval(t);
  }, [ms]);
}

/** An edit's change: removed lines red, added lines green, the rest as they are (a
 *  block each, so the text copies as lines). */
function Diff({ diff }: { diff: string }) {
  return (
    <pre class="inbox-diff" data-testid="diff">
      {diff
        .replace(/\n$/, "")
        .split("\n")
        .map((line, i) => (
          <span key={i} class={line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : undefined}>
            {line}
          </span>
        ))}
    </pre>
  );
}

/**
 * One thing a run waits on a person for, with the decisions the caller may take on it
 * now (`item.decisions`): Approve, Approve always (naming the rules it keeps), Deny with
 * an optional message, or Answer for a question; and Open terminal when the caller may
 * drop in (`terminal` false leaves it out, on the run's own page). `onDone` runs after a
 * decision was recorded (the item has closed: reload).
 */
export function InboxCard({
  item,
  onDone,
  terminal = true,
  compact = false,
}: {
  item: InboxItem;
  onDone: () => void;
  terminal?: boolean;
  /** Inside a list's row: the row already names the run and its task, so the card
   *  leaves its links line out and keeps a long command shorter (it scrolls). */
  compact?: boolean;
}) {
  const [message, setMessage] = useState("");
  const [answer, setAnswer] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const may = (d: string) => item.decisions.includes(d);
  const question = item.kind === "question";

  const act = async (call: () => Promise<unknown>) => {
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      await call();
      onDone();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  const decide = (decision: DecideBody["decision"], text?: string) =>
    act(() =>
      api<InboxItem>(`/api/v1/attention/${enc(item.id)}/decide`, {
        method: "POST",
        json: { decision, message: text?.trim() ? text.trim() : null } satisfies DecideBody,
      }),
    );
  const reply = () => act(() => api(`/api/v1/notes/${enc(item.id)}/answer`, { method: "POST", json: { text: answer } }));

  const terminalLink = terminal && item.can_drop_in && item.session && (
    <a class="button" href={`/sessions/${item.session}`}>
      Open terminal
    </a>
  );

  return (
    <article class={`inbox-card kind-${item.kind}${compact ? " compact" : ""}`} data-item={item.id} data-kind={item.kind} aria-label={item.words}>
      <header class="inbox-head">
        <strong class="inbox-words">{item.words}</strong>
        <span class="muted" title={when(item.raised_at)}>
          {ago(item.raised_at)}
        </span>
      </header>
      {!compact && (
        <p class="inbox-meta">
          {item.session ? (
            <a href={`/sessions/${item.session}`} data-testid="run-link">
              {item.title || item.session}
            </a>
          ) : (
            item.title
          )}
          {item.task && (
            <>
              {" · "}
              <a href={`/tasks/${item.task}`} data-testid="task-link">
                its task
              </a>
            </>
          )}
          {item.tool && (
            <>
              {" · tool "}
              <code>{item.tool}</code>
            </>
          )}
        </p>
      )}
      {item.guess && (
        <p class="inbox-guess" data-testid="guess">
          (a guess: its screen has been still for a while, as if it waits for input; nothing reported that it does)
        </p>
      )}
      {item.subject && !question && (
        <pre class="inbox-subject" data-testid="subject">
          <code>{item.subject}</code>
        </pre>
      )}
      {item.diff && <Diff diff={item.diff} />}
      {item.clipped && (
        <p class="muted" data-testid="clipped">
          It is too long to show whole here, so it cannot be approved here: open its terminal to decide.
        </p>
      )}
      <div class="inbox-actions" role="group" aria-label="What you can do">
        {may("approve") && (
          <button type="button" class="button primary" disabled={busy} onClick={() => decide("approve")}>
            Approve
          </button>
        )}
        {may("approve_always") && (
          <div class="inbox-always">
            <button type="button" class="button" disabled={busy} onClick={() => decide("approve_always")}>
              {item.task ? "Approve always for this task" : "Approve always for this run"}
            </button>
            {item.always_rules.length > 0 && (
              <span class="muted" data-testid="always-rules">
                keeps{" "}
                {item.always_rules.map((r, i) => (
                  <Fragment key={r}>
                    {i > 0 && ", "}
                    <code>{r}</code>
                  </Fragment>
                ))}
              </span>
            )}
          </div>
        )}
        {may("deny") && (
          <form
            class="inbox-field"
            onSubmit={(e) => {
              e.preventDefault();
              decide("deny", message);
            }}
          >
            <input
              class="search"
              aria-label="Message for the agent with Deny (optional)"
              placeholder="Why not (optional)"
              maxLength={2000}
              value={message}
              onInput={(e) => setMessage((e.target as HTMLInputElement).value)}
            />
            <button type="submit" class="button danger" disabled={busy}>
              Deny
            </button>
          </form>
        )}
        {may("answer") && (
          <form
            class="inbox-field"
            onSubmit={(e) => {
              e.preventDefault();
              if (answer.trim()) reply();
            }}
          >
            <input
              class="search"
              aria-label={`Answer to ${item.subject ?? item.words}`}
              placeholder="Your answer"
              value={answer}
              onInput={(e) => setAnswer((e.target as HTMLInputElement).value)}
            />
            <button type="submit" class="button primary" disabled={busy || !answer.trim()}>
              Answer
            </button>
          </form>
        )}
        {terminalLink}
        {item.decisions.length === 0 && (
          <span class="muted" data-testid="hint">
            {!item.can_drop_in
              ? `Someone who may drop in to its run ${item.kind === "permission" ? "decides" : "answers"} it.`
              : item.kind === "permission"
                ? "Decide it in its terminal."
                : "Answer it in its terminal, or with Send on its page."}
          </span>
        )}
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </article>
  );
}

/** Everything that waits on a person now, for a list to match to its rows. */
export function loadInbox(): Promise<InboxItem[]> {
  return api<Inbox>("/api/v1/inbox").then((i) => i.items);
}


/** A list row's badge for what it waits on a person for: one tap opens (or closes)
 *  the row's panel of actions, `needs-${id}`. */
export function NeedsToggle({ id, label, open, onToggle }: { id: string; label: string; open: boolean; onToggle: () => void }) {
  return (
    <button
      type="button"
      class="badge warning needs-toggle"
      aria-expanded={open}
      aria-controls={`needs-${id}`}
      title={open ? "Hide what you can do about it" : "It waits on a person: show what you can do about it"}
      data-testid="needs-toggle"
      onClick={onToggle}
    >
      {label} {open ? "▾" : "▸"}
    </button>
  );
}

/** A list row's panel under it: a compact card for each thing its run or task waits
 *  on, with the same decisions as on Needs you. `onDone` reloads the list's inbox. */
export function NeedsRow({ id, items, columns, onDone }: { id: string; items: InboxItem[]; columns: number; onDone: () => void }) {
  useTick();
  return (
    <tr class="needs-row" id={`needs-${id}`} data-needs={id}>
      <td colSpan={columns}>
        <div class="needs-panel" data-testid="needs-panel">
          {items.map((item) => (
            <InboxCard key={item.id} item={item} compact onDone={onDone} />
          ))}
        </div>
      </td>
    </tr>
  );
}

/** What the run `session` waits on, for its page: nothing when it waits on no one.
 *  `version` changes with the run's activity, to reload. */
export function SessionWaits({ session, version }: { session: string; version: number }) {
  const [items, setItems] = useState<InboxItem[]>([]);
  const [reloads, setReloads] = useState(0);
  useTick();
  useEffect(() => {
    api<Inbox>("/api/v1/inbox").then(
      (i) => setItems(i.items.filter((x) => x.session === session)),
      () => {},
    );
  }, [session, version, reloads]);
  if (items.length === 0) return null;
  return (
    <section class="inbox session-waits" aria-labelledby="waits-h" data-testid="session-waits">
      <h2 id="waits-h">Waiting on you</h2>
      {items.map((item) => (
        <InboxCard key={item.id} item={item} terminal={false} onDone={() => setReloads((n) => n + 1)} />
      ))}
    </section>
  );
}

export function InboxPage() {
  const [items, setItems] = useState<InboxItem[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useTick();
  const load = () =>
    api<Inbox>("/api/v1/inbox").then(
      (i) => {
        setItems(i.items);
        setError(null);
      },
      (e) => setError(errorText(e)),
    );
  useEffect(() => {
    load();
    return subscribe(() => load());
  }, []);
  return (
    <section class="page inbox">
      <header class="page-header">
        <h1>Needs you</h1>
      </header>
      <p class="meta">What runs wait on a person for, newest first: tool calls held for approval, finished turns, and questions.</p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {items === null && !error && <p class="muted">Loading…</p>}
      {items?.length === 0 && <p class="empty">Nothing waits on you.</p>}
      {(items ?? []).map((item) => (
        <InboxCard key={item.id} item={item} onDone={load} />
      ))}
    </section>
  );
}
