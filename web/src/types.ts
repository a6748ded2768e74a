// Shapes of the JSON the server sends (crates/protocol/src/api.rs).

export type Outcome = "starting" | "running" | "completed" | "released" | "incomplete" | "failed" | "lost";
export type SandboxState = "provision" | "ready" | "active" | "completing" | "done" | "abandoned" | "stopped";

export interface Me { name: string; role: string }

export interface LastRun {
  id: string;
  outcome: Outcome;
  exit_code: number | null;
  started_at: string | null;
  ended_at: string | null;
  /** Whether you may drop in (owners, admins, its agent's operator). */
  can_drop_in: boolean;
}

export interface Sandbox {
  id: string;
  kind: "remote" | "task";
  task_type: string | null;
  /** The task it works (task sandboxes). */
  task?: string | null;
  state: SandboxState;
  live: boolean;
  last_run: LastRun | null;
  runs: number;
  agent: string | null;
  working_on: string;
  device: string;
  repo: string | null;
  cost_usd: number | null;
  /** A run used a model with no price: the cost is unknown. */
  cost_unknown?: boolean;
  task_cost_usd: number | null;
  task_cost_unknown?: boolean;
  warning: string | null;
  created_at: string;
}

export interface SandboxList { sandboxes: Sandbox[]; next_cursor: string | null }

export interface AttentionRow {
  session: string;
  title: string;
  outcome: Outcome;
  flag: string;
  agent: string | null;
  device: string;
  last_contact_at: string | null;
  explanation: string;
}

export interface Overview {
  running: number;
  queued: number;
  on_finished_tasks: number;
  stale: number;
  /** Open tasks waiting on a person (the Tasks badge). */
  tasks_needing_a_person: number;
  attention: AttentionRow[];
}

export interface Session {
  id: string;
  sandbox: string;
  sandbox_state: SandboxState;
  title: string;
  device: string;
  command: string[];
  cwd: string;
  outcome: Outcome;
  exit_code: number | null;
  reason: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  duration_secs: number | null;
  cols: number;
  rows: number;
  output_bytes: number;
  attached: number;
  started_by: string;
  task: string | null;
  stage: string | null;
  agent: string | null;
  /** The repository its sandbox works in (task runs). */
  repo?: string | null;
  last_output_at: string | null;
  last_progress: { label: string; at: string } | null;
  pruned_at?: string | null;
  final_offset?: number | null;
  /** Whether you may open its terminal, read its output, send input, Stop. */
  can_drop_in: boolean;
  /** Its model spend, read from its harness's records. */
  spend?: Spend | null;
  /** Which of the workspace's skills reached it (task runs). */
  skills?: { name: string; outcome: "installed" | "unsupported" | "failed"; detail: string }[] | null;
}

export interface Tokens { input: number; output: number; cache_write_5m: number; cache_write_1h: number; cache_read: number }
export interface Spend {
  total_usd: number | null;
  generation_usd: number;
  cache_read_usd: number;
  total_nano: number | null;
  generation_nano: number;
  cache_read_nano: number;
  turns: number;
  cache_hit_pct: number | null;
  tokens: Tokens;
  model: string | null;
  models: { model: string; tokens: Tokens; turns: number }[];
}

export interface Device {
  id: string;
  name: string;
  slots: number;
  live_sessions: number;
  connected: boolean;
  last_contact_at: string | null;
  revoked_at?: string | null;
  /** What the device does with its runs, as its daemon last said (null: it never said). */
  sandbox?: SandboxOffer | null;
}

/** A device's sandbox (core::confinement::Offer). */
export type SandboxOffer =
  | { state: "sandboxed"; mechanism: string }
  | { state: "unsandboxed"; kernel: string }
  | { state: "unavailable"; reason: string };

export interface ActivityEvent {
  seq: number;
  id: string;
  kind: string;
  label: string;
  actor: string;
  session: string | null;
  task?: string | null;
  /** The title of the session it concerns. */
  session_title?: string | null;
  /** The title of the task it concerns. */
  task_title?: string | null;
  detail: Record<string, unknown> | null;
  at: string;
}

export interface InputReceipt { session: string; event: string; bracketed_paste: boolean; offset: number }

export type ViewerEvent =
  | { type: "hello"; session: string; cols: number; rows: number; read_only: boolean }
  | { type: "resize"; cols: number; rows: number }
  | { type: "resync" }
  | { type: "ended"; outcome: Outcome; exit_code: number | null; reason: string | null }
  | { type: "error"; message: string };

export const isLive = (o: Outcome) => o === "starting" || o === "running";

export interface Stage { stage: string; assignee: string | null; merge: boolean | null }

export interface Repo { name: string; devices: [string, string][]; base: string | null }

export interface Agent {
  name: string;
  operator: string;
  harness: string;
  model: string | null;
  provider: string | null;
  account?: string | null;
  effort?: string | null;
}

/** What all of an agent's or a repository's runs cost. */
export interface PageSpend {
  /** USD; null without usage, or when a run used a model with no price. */
  cost_usd: number | null;
  cost_unknown: boolean;
}

/** `GET /api/v1/agents/{name}`: runs live first, then newest first. */
export interface AgentPage { agent: Agent; sessions: Session[]; more_sessions: boolean; tasks: Task[]; spend: PageSpend }

/** `GET /api/v1/repos/{name}`: runs live first, then newest first. */
export interface RepoPage { repo: Repo; sessions: Session[]; more_sessions: boolean; tasks: Task[]; spend: PageSpend }

export interface Task {
  id: string;
  kind: string;
  title: string;
  body: string;
  status: "open" | "done" | "cancelled" | "abandoned";
  repo: string;
  workflow: Stage[];
  stage: string | null;
  attempts: number;
  queued_at: string | null;
  flagged: string | null;
  branch: string | null;
  sandbox: string | null;
  sandbox_state: SandboxState | null;
  live_session: string | null;
  /** Whose turn it is. */
  turn: Turn;
  /** Whether you may drop in to its live run. */
  can_drop_in: boolean;
  /** Lifetime spend of all its runs, USD; null without usage or when unknown. */
  cost_usd?: number | null;
  cost_unknown?: boolean;
  spend_cap_usd?: number | null;
  created_by: string;
  created_at: string;
}

/** Whose turn it is on a task (the server decides; the list shows `label`). */
export interface Turn {
  kind: "person" | "answer" | "blocked" | "flagged" | "ready" | "stalled" | "queued" | "starting" | "running" | "finished";
  label: string;
  needs_person: boolean;
}

export interface Note {
  id: string;
  kind: "blocker" | "question";
  text: string;
  answer: string | null;
  closed_by: string | null;
  closed_at: string | null;
  created_by: string;
}

/** Which of the Sessions panel's controls you may use. */
export interface TaskControls { finish: boolean; retire: boolean; cancel: boolean }
export interface TaskDetail { task: Task; sessions: Session[]; notes: Note[]; events: ActivityEvent[]; controls: TaskControls }

export interface Member { id: string; name: string; role: "owner" | "admin" | "member"; created_at: string; has_password: boolean }
export interface Invite { id: string; role: string; code: string; path: string; expires_at: string }
export interface Token { id: string; label: string; created_at: string; last_used_at: string | null; revoked_at: string | null }
