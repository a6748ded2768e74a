// A repository's page (seed 001): the devices with a clone and where, the base branch,
// its sessions (live first; a live one expands to the Send box), its tasks and what its
// runs cost.

import { enc } from "../api";
import type { RepoPage as Page } from "../types";
import { Runs, SpendText, Tasks, usePage } from "./runs";

export function RepoPage({ name }: { name: string }) {
  const { page, error } = usePage<Page>(`/api/v1/repos/${enc(name)}`);
  if (error && !page) return <section class="page"><p class="error">{error}</p></section>;
  if (!page) return <section class="page muted">Loading…</section>;
  const r = page.repo;
  return (
    <section class="page">
      <header class="page-header">
        <h1 class="title">{r.name}</h1>
        <span class="badge info">repository</span>
      </header>
      <p class="meta" data-testid="repo-facts">
        base {r.base ? <code>{r.base}</code> : "the clone's checked-out branch"} · <SpendText spend={page.spend} />
      </p>
      <ul class="clones" data-testid="clones">
        {r.devices.map(([device, path]) => (
          <li key={device}>
            <a href={`/devices/${enc(device)}`}>{device}</a>: <code>{path}</code>
          </li>
        ))}
        {r.devices.length === 0 && <li class="muted">No device has a clone registered.</li>}
      </ul>
      {error && <p class="error">{error}</p>}
      <Runs sessions={page.sessions} more={page.more_sessions} other="agent" empty="No session has worked in this repository yet." />
      <Tasks tasks={page.tasks} showRepo={false} empty="No tasks in this repository yet." />
    </section>
  );
}
