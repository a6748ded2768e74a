// The workspace's activity feed, newest first, growing live.

import { useEffect, useState } from "preact/hooks";
import { api, errorText } from "../api";
import { when } from "../format";
import { subscribe } from "../live";
import type { ActivityEvent } from "../types";
import { EventDetail } from "./session";

export function ActivityPage() {
  const [events, setEvents] = useState<ActivityEvent[]>([]);
  // Whether the first page came: until then, no "nothing has happened" is known.
  const [loaded, setLoaded] = useState(false);
  const [more, setMore] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const load = async (before: number | null) => {
    const p = new URLSearchParams({ newest: "true", limit: "100" });
    if (before != null) p.set("before", String(before));
    try {
      const page = await api<ActivityEvent[]>(`/api/v1/events?${p}`);
      setEvents((old) => (before != null ? [...old, ...page] : page));
      setMore(page.length === 100);
      setLoaded(true);
    } catch (e) {
      setError(errorText(e));
    }
  };
  useEffect(() => {
    load(null);
    return subscribe((m) => {
      if (m.kind === "activity") setEvents((old) => (old.some((e) => e.seq === m.event.seq) ? old : [m.event, ...old]));
      if (m.kind === "resync") load(null);
    });
  }, []);
  return (
    <section class="page">
      <header class="page-header">
        <h1>Activity</h1>
      </header>
      {error && <p class="error">{error}</p>}
      <ol class="timeline feed">
        {events.map((e) => (
          <li key={e.id} data-kind={e.kind}>
            <span class="when">{when(e.at)}</span> <strong>{e.label}</strong> <span class="muted">by {e.actor}</span>
            {e.task && (
              <>
                {" "}
                · task <a href={`/tasks/${e.task}`}>{e.task_title ?? e.task}</a>
              </>
            )}
            {e.session && (
              <>
                {" "}
                · session <a href={`/sessions/${e.session}`} title={e.session}>{e.session_title ?? e.session}</a>
              </>
            )}
            <EventDetail e={e} />
          </li>
        ))}
      </ol>
      {loaded && events.length === 0 && !error && <p class="empty">Nothing has happened yet.</p>}
      {more && (
        <p class="load-more">
          <a
            href="#"
            onClick={(e) => {
              e.preventDefault();
              load(events[events.length - 1]?.seq ?? null);
            }}
          >
            Load more
          </a>
        </p>
      )}
    </section>
  );
}
