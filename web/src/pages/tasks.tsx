// Tasks: the list (with ▶ Drop in on tasks with a live session) and a task's page: its
// Workflow view, the Sessions panel's controls, blockers and questions, and its Activity.

import { ConfirmButton } from "../confirm";
import { Fragment } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, enc, errorText } from "../api";
import { OutcomeBadge } from "../badges";
import { ago, cap, usd, when } from "../format";
import { subscribe } from "../live";
import { AgentLink, RepoLink } from "../links";
import { navigate } from "../router";
import type { Agent, InboxItem, Repo, Stage, Task, TaskDetail } from "../types";
import { useOpenRows } from "../open-rows";
import { NeedsRow, NeedsToggle, loadInbox } from "./inbox";
import { EventDetail } from "./session";


/** A task's state: finished, or whose turn it is. */
export function TaskState({ t }: { t: Task }) {
  if (t.status !== "open") return <span class={`badge task-${t.status}`}>{cap(t.status)}</span>;
  const turn = t.turn;
  if (turn.kind === "queued") return <span class="badge info" title="Waiting for a device slot; it starts by itself when one frees">{turn.label}</span>;
  if (turn.kind === "running" || turn.kind === "starting") return <span class="badge ok"><span class="dot" aria-hidden="true" /> {turn.label}</span>;
  return (
    <span class={turn.needs_person ? "badge warning turn" : "badge turn"} title={turn.label} data-testid="task-turn">
      {turn.label}
    </span>
  );
}

/** A task row's shared cells: type, title, stage, whose turn (labelled `turnLabel`),
 * the repository (unless `repo` is false) and when it was filed. */
export function TaskCells({ t, turnLabel, repo = true }: { t: Task; turnLabel: string; repo?: boolean }) {
  return (
    <>
      <td data-label="Type">
        <span class="badge type">{t.kind}</span>
      </td>
      <td data-label="Task" class="working-on">
        <a href={`/tasks/${t.id}`}>{t.title}</a>
      </td>
      <td data-label="Stage">{t.stage ? cap(t.stage) : "—"}</td>
      <td data-label={turnLabel}>
        <TaskState t={t} />
      </td>
      {repo && (
        <td data-label="Repo">
          <RepoLink name={t.repo} />
        </td>
      )}
      <td data-label="Filed" title={when(t.created_at)}>
        {ago(t.created_at)}
      </td>
    </>
  );
}

const TASK_TYPES = ["story", "bug", "chore", "spike"];


/** "plan → code → merge (merges)": a workflow in one line. */
function stagesLine(stages: Stage[]): string {
  return stages.map((s) => `${cap(s.stage)}${s.merge ? " (merges)" : ""}`).join(" → ");
}

/** Files a task in plain language; its stages come from the workspace's workflow. */
function NewTaskForm({ onClose }: { onClose: () => void }) {
  const [repos, setRepos] = useState<Repo[] | null>(null);
  const [agents, setAgents] = useState<Agent[]>([]);
  const [stages, setStages] = useState<Stage[]>([]);
  const [title, setTitle] = useState("");
  const [kind, setKind] = useState("story");
  const [repo, setRepo] = useState("");
  const [agent, setAgent] = useState("");
  const [body, setBody] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    Promise.all([api<Repo[]>("/api/v1/repos"), api<Agent[]>("/api/v1/agents"), api<{ stages: Stage[] }>("/api/v1/workflow")]).then(
      ([r, a, w]) => {
        setRepos(r);
        setAgents(a);
        setStages(w.stages);
        if (r.length > 0) setRepo(r[0].name);
        if (a.length > 0) setAgent(a[0].name);
      },
      (e) => setError(errorText(e)),
    );
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const t = await api<Task>("/api/v1/tasks", { method: "POST", json: { title, kind, repo, body, agent: agent || null, workflow: null } });
      navigate(`/tasks/${t.id}`);
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };
  if (repos && repos.length === 0) {
    return (
      <div class="panel new-task">
        <p>
          No repository is registered yet. Register a device's clone first:{" "}
          <code>drover repo add NAME --device DEVICE --path /path/to/clone</code>
        </p>
        <button class="button" type="button" onClick={onClose}>
          Close
        </button>
      </div>
    );
  }
  return (
    <form class="panel new-task" aria-label="File a task" onSubmit={submit}>
      <label>
        Title
        <input class="search" required maxLength={500} value={title} onInput={(e) => setTitle((e.target as HTMLInputElement).value)} />
      </label>
      <div class="send-row">
        <label>
          Type
          <select value={kind} onChange={(e) => setKind((e.target as HTMLSelectElement).value)}>
            {TASK_TYPES.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </label>
        <label>
          Repo
          <select value={repo} onChange={(e) => setRepo((e.target as HTMLSelectElement).value)}>
            {(repos ?? []).map((r) => (
              <option key={r.name} value={r.name}>
                {r.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Agent
          <select value={agent} onChange={(e) => setAgent((e.target as HTMLSelectElement).value)}>
            {agents.map((a) => (
              <option key={a.name} value={a.name}>
                {a.name} ({a.harness})
              </option>
            ))}
            <option value="">No agent: people work the stages</option>
          </select>
        </label>
      </div>
      <label>
        What needs doing
        <textarea rows={6} maxLength={65536} value={body} onInput={(e) => setBody((e.target as HTMLTextAreaElement).value)} />
      </label>
      {stages.length > 0 && <p class="muted">Stages: {stagesLine(stages)}</p>}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div class="send-row">
        <button class="button primary" type="submit" disabled={busy || !repos}>
          File task
        </button>
        <button class="button" type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function TasksPage() {
  const [tasks, setTasks] = useState<Task[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [filing, setFiling] = useState(false);
  // What waits on a person, matched to rows by task: held calls of its run, its questions.
  const [inbox, setInbox] = useState<InboxItem[]>([]);
  const [open, toggle] = useOpenRows();
  const reloadInbox = () => loadInbox().then(setInbox, () => {});
  useEffect(() => {
    const load = () => {
      api<Task[]>("/api/v1/tasks").then(setTasks, (e) => setError(errorText(e)));
      reloadInbox();
    };
    load();
    return subscribe(() => load());
  }, []);
  return (
    <section class="page">
      <header class="page-header">
        <h1>Tasks</h1>
        {!filing && (
          <button class="button primary" onClick={() => setFiling(true)}>
            New task
          </button>
        )}
      </header>
      {filing && <NewTaskForm onClose={() => setFiling(false)} />}
      {error && <p class="error">{error}</p>}
      <div class="table-wrap">
        <table class="tasks">
          <thead>
            <tr>
              <th>Type</th>
              <th>Task</th>
              <th>Stage</th>
              <th>State</th>
              <th>Repo</th>
              <th>Filed</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {(tasks ?? []).map((t) => {
              // Its turn says it waits on a person for its run or a question: the
              // things it waits on, with what you can do about them, one tap away.
              const waits = t.status === "open" && (t.turn.kind === "waiting" || t.turn.kind === "answer");
              const items = waits ? inbox.filter((i) => i.task === t.id) : [];
              const opened = items.length > 0 && open.has(t.id);
              return (
                <Fragment key={t.id}>
                  <tr data-task={t.id}>
                    <TaskCells t={t} turnLabel="State" />
                    <td data-label="Actions">
                      <span class="cell">
                        {items.length > 0 && (
                          <NeedsToggle
                            id={t.id}
                            label={items.length > 1 ? `Needs you · ${items.length}` : "Needs you"}
                            open={opened}
                            onToggle={() => toggle(t.id)}
                          />
                        )}
                        {t.live_session && t.can_drop_in ? (
                          <a class="button primary" href={`/sessions/${t.live_session}`}>
                            ▶ Drop in
                          </a>
                        ) : t.live_session ? (
                          <a href={`/sessions/${t.live_session}`}>Live run →</a>
                        ) : (
                          items.length === 0 && "—"
                        )}
                      </span>
                    </td>
                  </tr>
                  {opened && <NeedsRow id={t.id} items={items} columns={7} onDone={reloadInbox} />}
                </Fragment>
              );
            })}
          </tbody>
        </table>
      </div>
      {tasks?.length === 0 && (
        <p class="empty">
          No tasks yet. File one with New task, or <code>drover task create --repo REPO --title TITLE --agent AGENT</code>.
        </p>
      )}
    </section>
  );
}

function Controls({ d, reload }: { d: TaskDetail; reload: () => void }) {
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ ok: boolean; text: string } | null>(null);
  const t = d.task;
  const completing = t.sandbox_state === "completing";
  const finishedSandbox = t.sandbox_state != null && ["done", "abandoned", "stopped"].includes(t.sandbox_state);
  const act = async (action: string, done: string) => {
    setBusy(true);
    try {
      await api(`/api/v1/tasks/${enc(t.id)}/${action}`, { method: "POST", json: {} });
      setMessage({ ok: true, text: done });
      reload();
    } catch (e) {
      setMessage({ ok: false, text: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  const stageHasAgent = t.workflow.find((s) => s.stage === t.stage)?.assignee != null;
  return (
    <div class="controls" role="group" aria-label="Sessions panel">
      {t.status === "open" && t.turn.kind === "ready" && (
        <button class="button primary" disabled={busy} onClick={() => act("activate", "Activated: the session starts when a slot is free.")}>
          Activate
        </button>
      )}
      {t.status === "open" && t.turn.kind !== "ready" && !t.live_session && !t.queued_at && stageHasAgent && !completing && (
        <button class="button primary" disabled={busy} onClick={() => act("launch", "A fresh session is queued for a slot.")}>
          Launch session
        </button>
      )}
      {t.live_session && !completing && d.controls.finish && (
        <button class="button" disabled={busy} onClick={() => act("finish", "The session is completing.")}>
          Finish session
        </button>
      )}
      {completing && d.controls.retire && (
        <button class="button" disabled={busy} onClick={() => act("mark-done", "The sandbox is done; its branch is kept.")}>
          Mark done
        </button>
      )}
      {t.sandbox && !finishedSandbox && d.controls.retire && (
        <ConfirmButton
          label="Abandon"
          question="Tear this sandbox down without merging and release its run? This cannot be undone; the task stays open."
          confirm="Abandon sandbox"
          cancel="Keep it"
          disabled={busy}
          onConfirm={() => act("abandon", "The sandbox was torn down without merging; Launch session starts the task afresh.")}
        />
      )}
      {t.status === "open" && d.controls.retire && (
        <ConfirmButton
          label="Abandon task"
          question="Abandon the whole task? Its sandbox is torn down without merging and it never runs again. This cannot be undone."
          confirm="Abandon task"
          cancel="Keep the task"
          disabled={busy}
          onConfirm={() => act("abandon?task=true", "The task is abandoned.")}
        />
      )}
      {t.status === "open" && d.controls.cancel && (
        <button class="button" disabled={busy} onClick={() => act("cancel", "The task is cancelled.")}>
          Cancel task
        </button>
      )}
      {message && (
        <span class={message.ok ? "ok-text" : "error"} role="status">
          {message.text}
        </span>
      )}
    </div>
  );
}

function Notes({ d, reload }: { d: TaskDetail; reload: () => void }) {
  const [answers, setAnswers] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  if (d.notes.length === 0) return null;
  const close = async (id: string, kind: string) => {
    try {
      const text = answers[id] ?? "";
      if (kind === "question") await api(`/api/v1/notes/${enc(id)}/answer`, { method: "POST", json: { text } });
      else await api(`/api/v1/notes/${enc(id)}/resolve`, { method: "POST", json: {} });
      reload();
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <section aria-labelledby="notes-h">
      <h2 id="notes-h">Blockers and questions</h2>
      {error && <p class="error">{error}</p>}
      <ol class="timeline">
        {d.notes.map((n) => (
          <li key={n.id} data-note={n.id}>
            <strong>{n.kind === "question" ? "Question" : "Blocker"}</strong> <span class="muted">from {n.created_by}</span>
            <div class="detail">{n.text}</div>
            {n.closed_at ? (
              <div class="muted">
                {n.kind === "question" ? `Answered by ${n.closed_by}: ${n.answer ?? ""}` : `Resolved by ${n.closed_by}`}
              </div>
            ) : (
              <form
                class="send-row"
                onSubmit={(e) => {
                  e.preventDefault();
                  close(n.id, n.kind);
                }}
              >
                {n.kind === "question" && (
                  <input
                    class="search"
                    aria-label={`Answer to ${n.text}`}
                    value={answers[n.id] ?? ""}
                    onInput={(e) => setAnswers({ ...answers, [n.id]: (e.target as HTMLInputElement).value })}
                  />
                )}
                <button class="button primary" type="submit">
                  {n.kind === "question" ? "Answer" : "Resolve"}
                </button>
              </form>
            )}
          </li>
        ))}
      </ol>
    </section>
  );
}

export function TaskPage({ id }: { id: string }) {
  const [d, setD] = useState<TaskDetail | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => api<TaskDetail>(`/api/v1/tasks/${enc(id)}`).then(setD, (e) => setError(errorText(e)));
  useEffect(() => {
    load();
    return subscribe(() => load());
  }, [id]);
  if (error) return <section class="page"><p class="error">{error}</p></section>;
  if (!d) return <section class="page muted">Loading…</section>;
  const t = d.task;
  return (
    <section class="page">
      <header class="page-header">
        <span class="badge type">{t.kind}</span>
        <h1 class="title">{t.title}</h1>
        <TaskState t={t} />
      </header>
      <p class="meta">
        <RepoLink name={t.repo} />
        {t.branch && (
          <>
            {" "}
            · branch <code>{t.branch}</code>
          </>
        )}{" "}
        · filed by {t.created_by} {ago(t.created_at)} ·{" "}
        <span data-testid="task-spend">
          spend {usd(t.cost_usd, t.cost_unknown)}
          {t.spend_cap_usd != null && ` of a ${usd(t.spend_cap_usd)} cap`}
        </span>
      </p>
      {t.status === "open" && t.flagged && <div class="banner bad">Needs a person: {t.flagged}</div>}
      {t.body && <p class="task-body">{t.body}</p>}
      <Controls d={d} reload={load} />
      <h2>Workflow</h2>
      <div class="table-wrap">
        <table class="workflow">
          <thead>
            <tr>
              <th>Stage</th>
              <th>Assignee</th>
              <th>Sessions</th>
            </tr>
          </thead>
          <tbody>
            {t.workflow.map((s) => {
              const runs = d.sessions.filter((r) => r.stage === s.stage);
              return (
                <tr key={s.stage} class={t.stage === s.stage ? "current" : ""}>
                  <td data-label="Stage">
                    {t.stage === s.stage ? "▶ " : ""}
                    {cap(s.stage)}
                    {s.merge && (
                      <span class="badge info" title="Handing this stage off merges the task's branch into the repository's base branch">
                        merges
                      </span>
                    )}
                  </td>
                  <td data-label="Assignee">{s.assignee == null ? "a person" : s.assignee.toLowerCase() === "human" ? s.assignee : <AgentLink name={s.assignee} />}</td>
                  <td data-label="Sessions">
                    {runs.length === 0
                      ? "—"
                      : runs.map((r) => (
                          <div key={r.id} class="run">
                            <OutcomeBadge outcome={r.outcome} />{" "}
                            {r.live && r.can_drop_in ? (
                              <a class="button primary" href={`/sessions/${r.id}`}>
                                ▶ Drop in
                              </a>
                            ) : (
                              <a href={`/sessions/${r.id}`}>View →</a>
                            )}
                          </div>
                        ))}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <Notes d={d} reload={load} />
      <h2>Activity</h2>
      <ol class="timeline">
        {d.events.map((e) => (
          <li key={e.id} data-kind={e.kind}>
            <span class="when">{when(e.at)}</span> <strong>{e.label}</strong> <span class="muted">by {e.actor}</span>
            <EventDetail e={e} />
          </li>
        ))}
      </ol>
    </section>
  );
}
