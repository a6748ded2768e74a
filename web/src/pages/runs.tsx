// What an agent's and a repository's pages share: loading the page and keeping it
// current, their runs (live ones first; a live run's row expands to the Send box), their
// tasks with whose turn it is, and what their runs cost.

import { useEffect, useState } from "preact/hooks";
import { api, errorText } from "../api";
import { LiveDot, OutcomeBadge } from "../badges";
import { ago, cap, usd, when } from "../format";
import { AgentLink, RepoLink } from "../links";
import { subscribe } from "../live";
import { useOpenRows } from "../open-rows";
import { SendBox } from "../sendbox";
import type { PageSpend, Session, Task } from "../types";
import { TaskCells } from "./tasks";

/** Live changes refresh the page at most this often. */
const REFRESH_MS = 400;

/** The page at `path`, loaded again (at most a few times a second) as things change. */
export function usePage<T>(path: string): { page: T | null; error: string | null } {
  const [page, setPage] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setPage(null);
    setError(null);
    const load = () =>
      api<T>(path).then(
        (p) => {
          setPage(p);
          setError(null);
        },
        (e) => setError(errorText(e)),
      );
    load();
    let timer: number | undefined;
    const unsubscribe = subscribe(() => {
      if (timer !== undefined) return;
      timer = window.setTimeout(() => {
        timer = undefined;
        load();
      }, REFRESH_MS);
    });
    return () => {
      window.clearTimeout(timer);
      unsubscribe();
    };
  }, [path]);
  return { page, error };
}

/** A run's cost: dollars, "unknown" (a model with no price), or "—" before any use. */
function runCost(s: Session): string {
  if (!s.spend) return "—";
  return usd(s.spend.total_usd, s.spend.total_usd == null);
}

/** What an expanded live run's row holds: the Send box for those who may send. */
function Expansion({ s }: { s: Session }) {
  if (!s.can_drop_in) {
    return (
      <p class="muted" data-testid="no-send">
        Only a workspace owner or admin, or the operator of its agent, can send it input.
      </p>
    );
  }
  return (
    <>
      <a class="button primary" href={`/sessions/${s.id}`}>
        ▶ Drop in
      </a>
      <SendBox id={s.id} />
    </>
  );
}

/** Which of agent and repository a page's run rows name: the one the page is not about. */
export type Other = "agent" | "repo";

function RunRow({ s, other, open, toggle }: { s: Session; other: Other; open: boolean; toggle: () => void }) {
  const live = !!s.live;
  const started = s.started_at ?? s.created_at;
  return (
    <>
      <tr data-session={s.id} class={live ? "live" : ""}>
        <td data-label="Session" class="working-on">
          <a href={`/sessions/${s.id}`}>{s.title || "Untitled session"}</a>
        </td>
        <td data-label="Outcome">
          <span class="cell">
            <LiveDot live={s.outcome === "running"} /> <OutcomeBadge outcome={s.outcome} />
          </span>
        </td>
        <td data-label="Stage">{s.stage ? cap(s.stage) : "—"}</td>
        <td data-label="Task">{s.task ? <a href={`/tasks/${s.task}`}>Task →</a> : "—"}</td>
        <td data-label={other === "agent" ? "Agent" : "Repo"}>{other === "agent" ? <AgentLink name={s.agent} /> : <RepoLink name={s.repo} />}</td>
        <td data-label="Started" title={when(started)}>
          {ago(started)}
        </td>
        <td data-label="Cost">{runCost(s)}</td>
        <td data-label="Actions" class="actions">
          {live ? (
            <button type="button" class="button" aria-expanded={open} aria-controls={`run-${s.id}`} onClick={toggle}>
              {open ? "▾ Collapse" : "▸ Expand"}
            </button>
          ) : (
            "—"
          )}
        </td>
      </tr>
      {live && open && (
        <tr class="run-expansion" id={`run-${s.id}`} data-expansion={s.id}>
          <td colSpan={8}>
            <Expansion s={s} />
          </td>
        </tr>
      )}
    </>
  );
}

/** The runs, live ones first (as the API orders them); live rows expand. */
export function Runs({ sessions, more, other, empty }: { sessions: Session[]; more: boolean; other: Other; empty: string }) {
  const [open, toggle] = useOpenRows();
  return (
    <section aria-labelledby="runs-h">
      <h2 id="runs-h">Sessions</h2>
      <div class="table-wrap">
        <table class="cards runs">
          <thead>
            <tr>
              <th>Session</th>
              <th>Outcome</th>
              <th>Stage</th>
              <th>Task</th>
              <th>{other === "agent" ? "Agent" : "Repo"}</th>
              <th>Started</th>
              <th>Cost</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {sessions.map((s) => (
              <RunRow key={s.id} s={s} other={other} open={open.has(s.id)} toggle={() => toggle(s.id)} />
            ))}
          </tbody>
        </table>
      </div>
      {sessions.length === 0 && <p class="empty">{empty}</p>}
      {more && <p class="muted">Only the latest {sessions.length} sessions are listed.</p>}
    </section>
  );
}

/** The tasks, newest first, with whose turn it is. */
export function Tasks({ tasks, showRepo, empty }: { tasks: Task[]; showRepo: boolean; empty: string }) {
  return (
    <section aria-labelledby="tasks-h">
      <h2 id="tasks-h">Tasks</h2>
      <div class="table-wrap">
        <table class="cards page-tasks">
          <thead>
            <tr>
              <th>Type</th>
              <th>Task</th>
              <th>Stage</th>
              <th>Now</th>
              {showRepo && <th>Repo</th>}
              <th>Filed</th>
              <th>Spend</th>
            </tr>
          </thead>
          <tbody>
            {tasks.map((t) => (
              <tr key={t.id} data-task={t.id}>
                <TaskCells t={t} turnLabel="Now" repo={showRepo} />
                <td data-label="Spend">{usd(t.cost_usd, t.cost_unknown)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {tasks.length === 0 && <p class="empty">{empty}</p>}
    </section>
  );
}

/** What all the runs cost. */
export function SpendText({ spend }: { spend: PageSpend }) {
  const text = spend.cost_unknown ? "unknown (a run used a model with no price)" : spend.cost_usd == null ? "none reported yet" : usd(spend.cost_usd);
  return <span data-testid="page-spend">total spend {text}</span>;
}
