// Devices: the list, and one device's page with its sessions.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, enc, errorText } from "../api";
import { OutcomeBadge, SandboxBadge } from "../badges";
import { ago, duration, when } from "../format";
import { subscribe } from "../live";
import type { Device, Session } from "../types";

/** Connected, offline, or revoked (refused until it is added again). */
function DeviceState({ d }: { d: Device }) {
  if (d.revoked_at) {
    return (
      <span class="badge warning" title="An admin revoked its credential: it is refused until it is added again">
        revoked
      </span>
    );
  }
  return d.connected ? <span class="badge ok">connected</span> : <span class="badge muted">offline</span>;
}

export function DevicesPage() {
  const [devices, setDevices] = useState<Device[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () => api<Device[]>("/api/v1/devices").then(setDevices, (e) => setError(errorText(e)));
    load();
    return subscribe(() => load());
  }, []);
  return (
    <section class="page">
      <header class="page-header">
        <h1>Devices</h1>
      </header>
      {error && <p class="error">{error}</p>}
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th>Device</th>
              <th>Connection</th>
              <th>Sandbox</th>
              <th>Live sessions</th>
              <th>Slots</th>
              <th>Last contact</th>
            </tr>
          </thead>
          <tbody>
            {(devices ?? []).map((d) => (
              <tr key={d.id}>
                <td>
                  <a href={`/devices/${enc(d.name)}`}>{d.name}</a>
                </td>
                <td>
                  <DeviceState d={d} />
                </td>
                <td>
                  <SandboxBadge offer={d.sandbox} />
                </td>
                <td>{d.live_sessions}</td>
                <td>{d.slots}</td>
                <td title={when(d.last_contact_at)}>{ago(d.last_contact_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {devices?.length === 0 && <p class="empty">No devices yet. `drover up` registers this machine.</p>}
    </section>
  );
}

/** Sessions per batch, and at most per refresh (the API's cap). */
const BATCH = 50;
const MAX_BATCH = 200;
/** Live changes refresh the page at most this often. */
const REFRESH_MS = 400;

/** Positive when `a` comes after `b` in the list (newest first). */
function newerFirst(a: Session, b: Session): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

export function DevicePage({ name }: { name: string }) {
  const [device, setDevice] = useState<Device | null>(null);
  const [sessions, setSessions] = useState<Session[]>([]);
  // Whether the first batch came: until then, no "no sessions yet" is known.
  const [loaded, setLoaded] = useState(false);
  const [more, setMore] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const rows = useRef<Session[]>([]);
  const moreRef = useRef(false);
  /** Loads the next batch after `after`, or (`after` null) the first `count` rows again,
   *  keeping rows already loaded further down. */
  const load = async (after: string | null, count = BATCH) => {
    const limit = Math.min(MAX_BATCH, Math.max(BATCH, count));
    const p = new URLSearchParams({ limit: String(limit) });
    if (after) p.set("cursor", after);
    try {
      const [devices, list] = await Promise.all([api<Device[]>("/api/v1/devices"), api<{ sessions: Session[] }>(`/api/v1/devices/${enc(name)}/sessions?${p}`)]);
      setDevice(devices.find((d) => d.name === name) ?? null);
      const fresh = list.sessions;
      let next: Session[];
      let more = fresh.length === limit;
      if (after) {
        next = [...rows.current, ...fresh];
      } else {
        // Rows loaded with Load more, past the refreshed ones, stay.
        const ids = new Set(fresh.map((s) => s.id));
        const last = fresh[fresh.length - 1];
        const older = last ? rows.current.filter((s) => !ids.has(s.id) && newerFirst(s, last) > 0) : [];
        if (older.length > 0) more = moreRef.current;
        next = [...fresh, ...older];
      }
      rows.current = next;
      moreRef.current = more;
      setSessions(next);
      setMore(more);
      setLoaded(true);
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
  };
  useEffect(() => {
    rows.current = [];
    setSessions([]);
    load(null);
    // Live changes refresh what is shown, at most a few times a second.
    let timer: number | undefined;
    const unsubscribe = subscribe(() => {
      if (timer !== undefined) return;
      timer = window.setTimeout(() => {
        timer = undefined;
        load(null, rows.current.length);
      }, REFRESH_MS);
    });
    return () => {
      window.clearTimeout(timer);
      unsubscribe();
    };
  }, [name]);
  return (
    <section class="page">
      <header class="page-header">
        <h1>{name}</h1>
        {device && <DeviceState d={device} />}
        {device && <SandboxBadge offer={device.sandbox} />}
      </header>
      {device && (
        <p class="meta">
          {device.live_sessions} live of {device.slots} slots · last contact{" "}
          <span title={device.last_contact_at ? when(device.last_contact_at) : undefined} data-testid="last-contact">
            {ago(device.last_contact_at)}
          </span>
        </p>
      )}
      {error && <p class="error">{error}</p>}
      <h2>Sessions</h2>
      <div class="table-wrap">
        <table class="cards">
          <thead>
            <tr>
              <th>Session</th>
              <th>State</th>
              <th>Started</th>
              <th>Duration</th>
              <th>Started by</th>
            </tr>
          </thead>
          <tbody>
            {sessions.map((s) => (
              <tr key={s.id}>
                <td data-label="Session" class="working-on">
                  <a href={`/sessions/${s.id}`}>{s.title}</a>
                </td>
                <td data-label="State">
                  <OutcomeBadge outcome={s.outcome} />
                </td>
                <td data-label="Started" title={when(s.started_at ?? s.created_at)}>
                  {ago(s.started_at ?? s.created_at)}
                </td>
                <td data-label="Duration">{s.outcome === "lost" ? "—" : duration(s.duration_secs)}</td>
                <td data-label="Started by">{s.started_by}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {loaded && sessions.length === 0 && !error && <p class="empty">No sessions on this device yet.</p>}
      {more && (
        <p class="load-more">
          <a
            href="#"
            onClick={(e) => {
              e.preventDefault();
              const end = rows.current[rows.current.length - 1];
              if (end) load(`${end.created_at}|${end.id}`);
            }}
          >
            Load more
          </a>
        </p>
      )}
    </section>
  );
}
