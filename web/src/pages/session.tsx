// A session's page: the live terminal while it runs; its recorded summary, final screen
// and recording once it has finished; "What this session did" either way.

import { ConfirmButton } from "../confirm";
import { useEffect, useRef, useState } from "preact/hooks";
import { Terminal } from "@xterm/xterm";
import { api, ApiError, enc, errorText } from "../api";
import { OutcomeBadge, StateBadge } from "../badges";
import { outcomeHelp } from "../outcomes";
import { duration, ago, cap, when, bytes, money, moneyExact } from "../format";
import { subscribe } from "../live";
import { Player, type RecordingWindow, type Screen } from "../player";
import { AgentLink, RepoLink } from "../links";
import { SendBox } from "../sendbox";
import { keySequence, LiveTerminal, pillHelp, pillText, type Pill } from "../terminal";
import type { ActivityEvent, SandboxList, Session } from "../types";
import { SessionWaits } from "./inbox";

function PillView({ pill }: { pill: Pill }) {
  const tone =
    pill.kind === "connected" ? "ok" : pill.kind === "ended" ? `ended outcome-${pill.outcome}` : pill.kind === "connecting" || pill.kind === "reconnecting" ? "wait" : "bad";
  return (
    <span class={`pill ${tone}`} data-testid="pill" role="status" aria-live="polite" title={pillHelp(pill)}>
      {pillText(pill)}
    </span>
  );
}

function EndedBanner({ pill }: { pill: Pill }) {
  if (pill.kind === "ended") {
    const lost = pill.outcome === "lost";
    return (
      <div class={`banner ${lost ? "bad" : "info"}`} data-testid="ended-banner">
        <strong>This session has ended: {pill.outcome}.</strong> {outcomeHelp(pill.outcome)}
        {pill.exitCode != null && ` Exit code ${pill.exitCode}.`}
        {lost ? (pill.reason ? ` Reason: ${pill.reason}` : " No device-level reason was recorded.") : pill.reason ? ` ${pill.reason}` : ""} The terminal can no
        longer be attached.
      </div>
    );
  }
  if (pill.kind === "no-permission") {
    return (
      <div class="banner bad" data-testid="ended-banner">
        You can't open this terminal: only a workspace owner or admin, or the operator of the session's agent (for a session started on a device, whoever
        started it), can drop in. Ask one of them, or an owner to change your role. {pill.message}
      </div>
    );
  }
  if (pill.kind === "rejected") {
    return (
      <div class="banner bad" data-testid="ended-banner">
        The connection couldn't be established ({pill.cause}).{" "}
        {pill.cause === "auth expired" ? "Sign in again (run `drover ui`) and reopen the session." : ""}
      </div>
    );
  }
  return null;
}

/** Keeps `--keyboard-inset` on the page at the height an on-screen keyboard covers at
 *  the bottom of the window, so the pinned key row sits above it. */
function useKeyboardInset() {
  useEffect(() => {
    const vv = window.visualViewport;
    if (!vv) return;
    const root = document.documentElement;
    const update = () => root.style.setProperty("--keyboard-inset", `${Math.max(0, Math.round(window.innerHeight - vv.height - vv.offsetTop))}px`);
    update();
    vv.addEventListener("resize", update);
    vv.addEventListener("scroll", update);
    return () => {
      vv.removeEventListener("resize", update);
      vv.removeEventListener("scroll", update);
      root.style.removeProperty("--keyboard-inset");
    };
  }, []);
}

function KeyRow({ live }: { live: LiveTerminal | null }) {
  useKeyboardInset();
  const keys: [Parameters<typeof keySequence>[0], string, string][] = [
    ["esc", "Esc", "Escape"],
    ["tab", "Tab", "Tab"],
    ["backtab", "⇧Tab", "Shift+Tab"],
    ["left", "←", "Left arrow"],
    ["up", "↑", "Up arrow"],
    ["down", "↓", "Down arrow"],
    ["right", "→", "Right arrow"],
  ];
  return (
    <div class="key-row" role="toolbar" aria-label="Terminal keys (not recorded)">
      {keys.map(([k, label, aria]) => (
        <button
          type="button"
          class="key"
          aria-label={aria}
          onClick={() => {
            if (!live) return;
            live.send(keySequence(k, live.appCursor));
            live.term.focus();
          }}
        >
          {label}
        </button>
      ))}
    </div>
  );
}

function Activity({ id, version }: { id: string; version: number }) {
  const [events, setEvents] = useState<ActivityEvent[] | null>(null);
  useEffect(() => {
    api<ActivityEvent[]>(`/api/v1/sessions/${enc(id)}/events`).then(setEvents, () => setEvents([]));
  }, [id, version]);
  return (
    <section class="did" aria-labelledby="did-h">
      <h2 id="did-h">What this session did</h2>
      {events === null ? (
        <p class="muted">Loading…</p>
      ) : events.length === 0 ? (
        <p class="muted">Nothing recorded yet.</p>
      ) : (
        <ol class="timeline">
          {events.map((e) => (
            <li key={e.id} data-kind={e.kind}>
              <span class="when" title={when(e.at)}>
                {when(e.at)}
              </span>{" "}
              <strong>{e.label}</strong> <span class="muted">by {e.actor}</span>
              <EventDetail e={e} />
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

export function EventDetail({ e }: { e: ActivityEvent }) {
  const d = e.detail ?? {};
  const parts: string[] = [];
  if (e.kind === "stage_advanced" && typeof d.stage === "string") parts.push(`${d.stage} → ${typeof d.next === "string" ? d.next : "done"}`);
  if (typeof d.note === "string" && d.note && e.kind === "stage_advanced") parts.push(`“${d.note}”`);
  if (typeof d.text === "string") parts.push(`“${d.text}”`);
  // Typed text and full command lines are for those who may drop in to the session.
  if (d.concealed === true) parts.push(e.kind === "input_sent" ? "text hidden: only those who may drop in see it" : "arguments hidden");
  if (e.kind === "commit" && typeof d.subject === "string") parts.push(`${String(d.head ?? "").slice(0, 10)} ${d.subject}`);
  if (e.kind === "merged" && typeof d.branch === "string" && typeof d.into === "string") {
    parts.push(`${d.branch} into ${d.into}${d.already ? " (already merged)" : ""} at ${String(d.commit ?? "").slice(0, 10)}`);
  }
  if (["finish_requested", "marked_done", "abandoned"].includes(e.kind) && typeof d.from === "string" && typeof d.to === "string") {
    parts.push(`sandbox ${d.from} → ${d.to}`);
  }
  if (typeof d.reason === "string") parts.push(d.reason);
  if (typeof d.outcome === "string" && e.kind !== "session_started") parts.push(`outcome ${d.outcome}`);
  if (typeof d.exit_code === "number") parts.push(`exit code ${d.exit_code}`);
  if (e.kind === "session_started" && typeof d.stage === "string") {
    parts.push(`${d.stage} stage, attempt ${String(d.attempt ?? 1)}${d.resumed ? ", resuming the lost run's conversation" : ""}`);
  }
  else if (Array.isArray(d.command)) parts.push(d.command.join(" "));
  if (typeof d.message === "string") parts.push(d.message);
  if (parts.length === 0) return null;
  return <div class="detail">{parts.join(" · ")}</div>;
}

/** Who watches: the server's count, which a page read before its own terminal connected
 *  does not include; a connected page counts itself. */
function attachedText(attached: number, connected: boolean): string {
  if (!connected) return `${attached} attached`;
  const n = Math.max(attached, 1);
  return n === 1 ? "1 attached (you)" : `${n} attached, you included`;
}

function LiveView({ session, onSession, version }: { session: Session; onSession: (s: Session) => void; version: number }) {
  const el = useRef<HTMLDivElement>(null);
  const [pill, setPill] = useState<Pill>({ kind: "connecting" });
  const [live, setLive] = useState<LiveTerminal | null>(null);
  const [stopError, setStopError] = useState<string | null>(null);
  const [stopping, setStopping] = useState(false);
  useEffect(() => {
    const t = new LiveTerminal(session.id, el.current!, setPill, onSession);
    setLive(t);
    // On a phone the terminal and the pinned key row fill the screen: bring them in.
    if (window.matchMedia("(max-width: 720px)").matches) el.current!.scrollIntoView({ block: "end" });
    return () => t.dispose();
  }, [session.id]);
  const ended = pill.kind === "ended" || pill.kind === "rejected" || pill.kind === "no-permission";
  const stop = async () => {
    setStopping(true);
    try {
      await api(`/api/v1/sessions/${enc(session.id)}/stop`, { method: "POST", json: {} });
    } catch (e) {
      setStopError(errorText(e));
      setStopping(false);
    }
  };
  return (
    <>
      <header class="page-header">
        <h1 class="title">{session.title}</h1>
        <PillView pill={pill} />
        {!ended && (
          <ConfirmButton
            label={stopping ? "Stopping…" : "Stop"}
            question="Stop this session? Its program is ended."
            confirm="Stop session"
            cancel="Keep running"
            disabled={stopping}
            onConfirm={stop}
          />
        )}
      </header>
      <p class="meta">
        <a href={`/devices/${enc(session.device)}`}>{session.device}</a> · started by {session.started_by} ·{" "}
        <span data-testid="attached">{attachedText(session.attached, pill.kind === "connected")}</span>
        {session.agent && <> · agent {session.agent}</>}
        {session.task && (
          <>
            {" "}
            · <a href={`/tasks/${session.task}`}>{session.stage ? `${session.stage} stage of its task` : "its task"}</a>
          </>
        )}
      </p>
      <p class="meta">
        Cost: <CostText s={session} />
      </p>
      <p class="meta" data-testid="progress">
        Last output: {ago(session.last_output_at)} · Last progress:{" "}
        {session.last_progress ? `${session.last_progress.label}, ${ago(session.last_progress.at)}` : "unknown (no hand-off, commit, comment, blocker or question yet)"}
      </p>
      {stopError && <p class="error">{stopError}</p>}
      <SessionWaits session={session.id} version={version} />
      <EndedBanner pill={pill} />
      {!ended && (
        <div class="banner info" data-testid="typing-banner">
          Typing in the terminal (and the keys below) goes straight to the program and is <strong>not recorded</strong> in the activity feed. Use the Send box to
          leave a record. Hold Shift (Option ⌥ on a Mac) to select text or scroll back when a full-screen program has captured the mouse.
        </div>
      )}
      <div class="term-frame" ref={el} data-testid="terminal" style={pill.kind === "no-permission" ? { display: "none" } : undefined} />
      {!ended && <KeyRow live={live} />}
      {!ended && <SendBox id={session.id} />}
    </>
  );
}

/** The screen at `us` µs into a session's recording (its Final screen without `us`). */
async function screenAt(id: string, us?: number): Promise<Screen> {
  const q = us === undefined ? "" : `?t=${us}`;
  for (let tries = 0; ; tries++) {
    const r = await fetch(`/api/v1/sessions/${enc(id)}/screen${q}`, { credentials: "same-origin" });
    // 503: an old session's checkpoints are still being built; they come in seconds.
    if (r.status === 503 && tries < 30) {
      await new Promise((done) => setTimeout(done, 2000));
      continue;
    }
    if (!r.ok) throw new Error(`the server answered ${r.status}`);
    const cols = Number(r.headers.get("x-drover-cols")) || 80;
    const rows = Number(r.headers.get("x-drover-rows")) || 24;
    const offset = Number(r.headers.get("x-drover-offset")) || 0;
    return { cols, rows, offset, data: new Uint8Array(await r.arrayBuffer()) };
  }
}

/** The window of a session's recording from output offset `from` on. */
async function recordingAt(id: string, from: number): Promise<RecordingWindow> {
  const r = await fetch(`/api/v1/sessions/${enc(id)}/recording?from=${from}`, { credentials: "same-origin" });
  if (!r.ok) throw new Error(`the server answered ${r.status}`);
  return r.json();
}

function FinalScreen({ id }: { id: string }) {
  const el = useRef<HTMLDivElement>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let term: Terminal | null = null;
    let gone = false;
    screenAt(id)
      .then(({ cols, rows, data }) => {
        if (gone) return;
        term = new Terminal({ cols, rows, disableStdin: true, cursorBlink: false, scrollback: 0, fontSize: 13, theme: { background: "#0f1115" } });
        term.open(el.current!);
        term.write(data);
      })
      .catch((e) => setError(String(e.message ?? e)));
    return () => {
      gone = true;
      term?.dispose();
    };
  }, [id]);
  return (
    <section aria-labelledby="final-h">
      <h2 id="final-h">Final screen</h2>
      {error ? <p class="error">{error}</p> : <div class="term-frame static" ref={el} data-testid="final-screen" />}
    </section>
  );
}

function Recording({ id }: { id: string }) {
  const el = useRef<HTMLDivElement>(null);
  const [player, setPlayer] = useState<Player | null>(null);
  const [pos, setPos] = useState(0);
  const [playing, setPlaying] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [speed, setSpeed] = useState(1);
  useEffect(() => {
    if (!el.current) return;
    let opened: Player | null = null;
    let gone = false;
    const onTick = (position: number, isPlaying: boolean) => {
      setPos(position);
      setPlaying(isPlaying);
    };
    Player.open(el.current, (from) => recordingAt(id, from), (us) => screenAt(id, us), onTick)
      .then((p) => {
        if (gone) return p.dispose();
        opened = p;
        setPlayer(p);
        // Its last frame until Play (which starts from the beginning), not a blank box.
        p.seek(p.length).then(() => el.current?.setAttribute("data-seeked", String(p.length)));
      })
      .catch((e) => setError(String(e.message ?? e)));
    return () => {
      gone = true;
      opened?.dispose();
    };
  }, [id]);
  return (
    <section aria-labelledby="rec-h">
      <h2 id="rec-h">Recording</h2>
      {error && <p class="error">{error}</p>}
      {player && (
        <div class="player-controls">
          <button type="button" class="button" onClick={() => (playing ? player?.pause() : player?.play())} data-testid="play">
            {playing ? "Pause" : "Play"}
          </button>
          <input
            type="range"
            min={0}
            max={Math.max(player.length, 0.001)}
            step={0.01}
            value={pos}
            aria-label="Position in the recording"
            onInput={(e) => {
              const to = Number((e.target as HTMLInputElement).value);
              player?.seek(to).then(() => el.current?.setAttribute("data-seeked", String(to)));
            }}
          />
          <span class="muted">
            {duration(pos)} / {duration(player.length)}
          </span>
          <select
            aria-label="Speed"
            value={String(speed)}
            onChange={(e) => {
              const s = Number((e.target as HTMLSelectElement).value);
              setSpeed(s);
              if (player) player.speed = s;
            }}
          >
            {[0.5, 1, 2, 4, 8].map((s) => (
              <option value={String(s)}>{s}×</option>
            ))}
          </select>
          <a href={`/api/v1/sessions/${enc(id)}/export`} download>
            Download .cast
          </a>
        </div>
      )}
      <div class="term-frame static" ref={el} data-testid="player" />
    </section>
  );
}

/** Seed 001's Cost row: total = generation + cache reads, turns, cache-hit %. */
export function CostText({ s }: { s: Session }) {
  const sp = s.spend;
  if (!sp) return <span data-testid="cost">—</span>;
  const hit = sp.cache_hit_pct != null ? ` · ${sp.cache_hit_pct.toFixed(0)}% cache hit` : "";
  const turns = `${sp.turns} turn${sp.turns === 1 ? "" : "s"}`;
  const exact =
    sp.total_nano == null
      ? []
      : [`exactly ${moneyExact(sp.total_nano)}: generation ${moneyExact(sp.generation_nano)} + cache reads ${moneyExact(sp.cache_read_nano)}`];
  return (
    <span data-testid="cost" title={[...exact, ...sp.models.map((m) => `${m.model}: ${m.turns} turns`)].join("\n")}>
      {sp.total_nano == null
        ? `unknown (a model with no price) · ${turns}${hit}`
        : `${money(sp.total_nano)} (generation ${money(sp.generation_nano)} + cache reads ${money(sp.cache_read_nano)}) · ${turns}${hit}`}
      {sp.model && <> · {sp.model}</>}
    </span>
  );
}

const SKILL_OUTCOME: Record<string, string> = {
  installed: "reached this session",
  unsupported: "did not reach it: its harness has no skills folder",
  failed: "did not reach it: installing failed",
};

/** Seed 001's Skills section: whether each enabled skill reached this task session. */
function Skills({ s }: { s: Session }) {
  if (!s.task) return null;
  return (
    <section aria-labelledby="skills-h">
      <h2 id="skills-h">Skills</h2>
      {!s.skills || s.skills.length === 0 ? (
        <p class="muted">No skills were enabled for the workspace when this session started.</p>
      ) : (
        <ul class="skills" data-testid="skills">
          {s.skills.map((k) => (
            <li key={k.name}>
              <strong>{k.name}</strong> — <span class={k.outcome === "installed" ? "ok-text" : "error"}>{SKILL_OUTCOME[k.outcome] ?? k.outcome}</span>{" "}
              <span class="muted">({k.detail})</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function Summary({ s }: { s: Session }) {
  const lost = s.outcome === "lost";
  const rows: [string, preact.ComponentChildren][] = [
    ["Agent", <AgentLink name={s.agent} />],
    ["Working on", s.task ? <a href={`/tasks/${s.task}`}>{s.title}</a> : s.title],
    ["Stage", s.stage ? cap(s.stage) : "—"],
    ["State", <OutcomeBadge outcome={s.outcome} />],
    ["Started", when(s.started_at ?? s.created_at)],
    [lost ? "Lost at" : "Ended", when(s.ended_at)],
  ];
  if (!lost) rows.push(["Duration", duration(s.duration_secs)]);
  rows.push(
    ["Exit code", s.exit_code != null ? String(s.exit_code) : "—"],
    ["Reason", s.reason ?? "—"],
    ["Repo", <RepoLink name={s.repo} />],
    ["Device", <a href={`/devices/${enc(s.device)}`}>{s.device}</a>],
    ["Cost", <CostText s={s} />],
  );
  return (
    <dl class="summary" data-testid="summary">
      {rows.map(([k, v]) => (
        <div class="row">
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

/** A command line's short form: its program's name, then `…` if there is more. */
function program(command: string[]): string {
  const name = (command[0] ?? "").split("/").pop() || command[0] || "";
  return command.length > 1 ? `${name} …` : name;
}

/** Whether a run works in the sandbox now (another run than this ended one, say), as
 *  the sandbox list says; false until known. */
function useSandboxLive(sandbox: string, version: number): boolean {
  const [live, setLive] = useState(false);
  useEffect(() => {
    api<SandboxList>(`/api/v1/sandboxes?filter=all&limit=1&q=${enc(sandbox)}`).then(
      (l) => setLive(l.sandboxes.some((b) => b.id === sandbox && b.live)),
      () => {},
    );
  }, [sandbox, version]);
  return live;
}

function FinishedView({ s, version }: { s: Session; version: number }) {
  const lost = s.outcome === "lost";
  const sandboxLive = useSandboxLive(s.sandbox, version);
  return (
    <>
      <header class="page-header">
        <h1 class="title">{s.title}</h1>
        <span class={`pill ended outcome-${s.outcome}`} data-testid="pill">
          session {s.outcome}
        </span>
      </header>
      <p class="meta">
        <StateBadge state={s.sandbox_state} live={sandboxLive} prefix="sandbox" /> · started by {s.started_by} · <code data-testid="program">{program(s.command)}</code> ·{" "}
        {bytes(s.output_bytes)} of output · {ago(s.ended_at)}
      </p>
      {s.command.join(" ") !== program(s.command) && (
        <details class="command" data-testid="command">
          <summary>Full command line</summary>
          <pre>{s.command.join(" ")}</pre>
        </details>
      )}
      {lost && (
        <div class="banner bad">
          Contact with this session was lost. {s.reason ? `Reason: ${s.reason}` : "No device-level reason was recorded."}
        </div>
      )}
      {s.pruned_at && (
        <div class="banner info" data-testid="pruned-banner">
          Its recording and activity were pruned {when(s.pruned_at)}, after the retention window; this summary is kept.
        </div>
      )}
      <Summary s={s} />
    </>
  );
}

export function SessionPage({ id }: { id: string }) {
  const [session, setSession] = useState<Session | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [version, setVersion] = useState(0);
  const [liveAtOpen, setLiveAtOpen] = useState<boolean | null>(null);
  useEffect(() => {
    setSession(null);
    setLiveAtOpen(null);
    api<Session>(`/api/v1/sessions/${enc(id)}`).then(
      (s) => {
        setSession(s);
        setLiveAtOpen(!!s.live);
      },
      (e) => setError(e),
    );
    return subscribe((m) => {
      const sid = m.kind === "activity" ? m.event.session : m.kind === "changed" ? m.session : null;
      if (sid === id) {
        setVersion((v) => v + 1);
        // Its spend and state change while it runs: show them as they come.
        api<Session>(`/api/v1/sessions/${enc(id)}`).then(setSession, () => {});
      }
    });
  }, [id]);
  if (error) {
    // Nothing to connect to: the pill names why, and nothing retries.
    const pill: Pill =
      error.status === 401
        ? { kind: "rejected", cause: error.code === "auth_expired" ? "auth expired" : "not signed in" }
        : error.status === 403
          ? { kind: "no-permission", message: error.message }
          : { kind: "rejected", cause: error.status === 404 || error.status === 400 ? "no such session" : error.message };
    return (
      <section class="page session-page">
        <header class="page-header">
          <h1 class="title">Session {id}</h1>
          <PillView pill={pill} />
        </header>
        <EndedBanner pill={pill} />
      </section>
    );
  }
  if (!session || liveAtOpen === null) return <section class="page muted">Loading…</section>;
  const finished = !session.live;
  return (
    <section class="page session-page">
      {liveAtOpen ? <LiveView session={session} onSession={setSession} version={version} /> : <FinishedView s={session} version={version} />}
      {liveAtOpen && finished && <Summary s={session} />}
      <Skills s={session} />
      <Activity id={id} version={version} />
      {/* Watched to its end, the terminal above already shows the final screen. */}
      {finished && !liveAtOpen && !session.pruned_at && session.can_drop_in && <FinalScreen id={id} />}
      {finished && !session.pruned_at && session.can_drop_in && <Recording id={id} />}
      {finished && !session.pruned_at && !session.can_drop_in && (
        <p class="muted" data-testid="no-scrollback">
          Its final screen and recording are shown to workspace owners and admins and to the operator of its agent.
        </p>
      )}
    </section>
  );
}
