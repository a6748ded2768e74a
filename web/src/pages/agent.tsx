// An agent's page (seed 001): its harness and route, its operator, its sessions (live
// first; a live one expands to the Send box), its tasks and what its runs cost.

import { enc } from "../api";
import type { AgentPage as Page } from "../types";
import { Runs, SpendText, Tasks, usePage } from "./runs";

export function AgentPage({ name }: { name: string }) {
  const { page, error } = usePage<Page>(`/api/v1/agents/${enc(name)}`);
  if (error && !page) return <section class="page"><p class="error">{error}</p></section>;
  if (!page) return <section class="page muted">Loading…</section>;
  const a = page.agent;
  const route = [a.model && `model ${a.model}`, a.provider && `provider ${a.provider}`, a.account && `account ${a.account}`, a.effort && `effort ${a.effort}`].filter(
    Boolean,
  );
  return (
    <section class="page">
      <header class="page-header">
        <h1 class="title">{a.name}</h1>
        <span class="badge info">agent</span>
      </header>
      <p class="meta" data-testid="agent-facts">
        harness {a.harness}
        {route.length > 0 && ` · ${route.join(" · ")}`} · operator {a.operator} · <SpendText spend={page.spend} />
      </p>
      {error && <p class="error">{error}</p>}
      <Runs sessions={page.sessions} more={page.more_sessions} other="repo" empty="This agent has not run yet." />
      <Tasks tasks={page.tasks} showRepo={true} empty="No task has this agent on a stage yet." />
    </section>
  );
}
