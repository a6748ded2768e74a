// Devices: the list, and one device's page with its sessions.

import { useEffect, useState } from "preact/hooks";
import { api, enc, errorText } from "../api";
import { LiveDot, OutcomeBadge } from "../badges";
import { ago, duration, when } from "../format";
import { subscribe } from "../live";
import type { Device, Session } from "../types";
import { isLive } from "../types";

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

export function DevicePage({ name }: { name: string }) {
  const [device, setDevice] = useState<Device | null>(null);
  const [sessions, setSessions] = useState<Session[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [more, setMore] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const load = async (after: string | null) => {
    const p = new URLSearchParams({ limit: "50" });
    if (after) p.set("cursor", after);
    try {
      const [devices, list] = await Promise.all([api<Device[]>("/api/v1/devices"), api<{ sessions: Session[] }>(`/api/v1/devices/${enc(name)}/sessions?${p}`)]);
      setDevice(devices.find((d) => d.name === name) ?? null);
      setSessions((old) => (after ? [...old, ...list.sessions] : list.sessions));
      const last = list.sessions[list.sessions.length - 1];
      setCursor(last ? `${last.created_at}|${last.id}` : null);
      setMore(list.sessions.length === 50);
      setError(null);
    } catch (e) {
      setError(errorText(e));
    }
  };
  useEffect(() => {
    load(null);
    return subscribe(() => load(null));
  }, [name]);
  return (
    <section class="page">
      <header class="page-header">
        <h1>{name}</h1>
        {device && <DeviceState d={device} />}
      </header>
      {device && (
        <p class="meta">
          {device.live_sessions} live of {device.slots} slots · last contact {ago(device.last_contact_at)}
        </p>
      )}
      {error && <p class="error">{error}</p>}
      <h2>Sessions</h2>
      <div class="table-wrap">
        <table>
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
                <td>
                  <a href={`/sessions/${s.id}`}>{s.title}</a>
                </td>
                <td>
                  <LiveDot live={isLive(s.outcome)} /> <OutcomeBadge outcome={s.outcome} />
                </td>
                <td title={when(s.started_at ?? s.created_at)}>{ago(s.started_at ?? s.created_at)}</td>
                <td>{s.outcome === "lost" ? "—" : duration(s.duration_secs)}</td>
                <td>{s.started_by}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {sessions.length === 0 && !error && <p class="empty">No sessions on this device yet.</p>}
      {more && (
        <p class="load-more">
          <a
            href="#"
            onClick={(e) => {
              e.preventDefault();
              load(cursor);
            }}
          >
            Load more
          </a>
        </p>
      )}
    </section>
  );
}
