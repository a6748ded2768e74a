// The Sessions page (seed 001): Sessions needing attention, the filter bar, and the
// sandbox list, loaded in batches as you scroll and kept current by the live stream.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, enc, errorText } from "../api";
import { LiveDot, OutcomeBadge, StateBadge, TypeBadges } from "../badges";
import { ago, exactUsd, usd, when } from "../format";
import { subscribe } from "../live";
import { AgentLink, RepoLink } from "../links";
import { navigate, useLocation } from "../router";
import type { InboxItem, Overview, Sandbox, SandboxList, SandboxState } from "../types";
import { useOpenRows } from "../open-rows";
import { NeedsRow, NeedsToggle, loadInbox } from "./inbox";

type Filter = "live" | "open" | "all";
const HEADINGS: Record<Filter, string> = { live: "Sandboxes running now", open: "All open sandboxes", all: "All sandboxes" };
const FINISHED: SandboxState[] = ["done", "abandoned", "stopped"];
const BATCH = 50;

/** Names one list: a filter and a search. */
const listKey = (filter: Filter, q: string) => `${filter}\n${q.trim()}`;

/** Whether any of `fields` holds `needle` (lower case; an empty needle matches), as the
 *  server's search matches titles, devices and ids. */
function mentions(needle: string, fields: string[]): boolean {
  return !needle || fields.some((s) => s.toLowerCase().includes(needle));
}

/** Whether `a` comes before `b` in the list: newest first, as the server orders it
 *  (created_at, then id, both compared as text). */
function before(a: Sandbox, b: Sandbox): boolean {
  return a.created_at > b.created_at || (a.created_at === b.created_at && a.id > b.id);
}

/** `b` in the list where it belongs: in place of its old self, or in order. A row past
 *  the last loaded one, with more still to load, is left for the batch that brings it. */
function placed(rows: Sandbox[], b: Sandbox, complete: boolean): Sandbox[] {
  const rest = rows.filter((o) => o.id !== b.id);
  const last = rest[rest.length - 1];
  if (rest.length === rows.length && !complete && last && before(last, b)) return rows;
  const i = rest.findIndex((o) => before(b, o));
  return i < 0 ? [...rest, b] : [...rest.slice(0, i), b, ...rest.slice(i)];
}

/** `rows` with a batch's rows added after them: rows a live update already placed keep
 *  their place, and the batch's task totals are the freshest for their tasks. */
function merged(rows: Sandbox[], batch: Sandbox[]): Sandbox[] {
  let out = [...rows, ...batch.filter((b) => !rows.some((o) => o.id === b.id))];
  for (const b of batch) out = sameTaskTotals(out, b);
  return out;
}

/** Every row of `b`'s task with `b`'s task total: the freshest figure holds for all. */
function sameTaskTotals(rows: Sandbox[], b: Sandbox): Sandbox[] {
  if (!b.task) return rows;
  return rows.map((o) =>
    o.task === b.task && o.id !== b.id ? { ...o, task_cost_usd: b.task_cost_usd, task_cost_unknown: b.task_cost_unknown } : o,
  );
}

function matches(b: Sandbox, filter: Filter): boolean {
  if (filter === "live") return b.live;
  if (filter === "open") return !FINISHED.includes(b.state);
  return true;
}

function Attention({ overview, q }: { overview: Overview | null; q: string }) {
  const needle = q.trim().toLowerCase();
  const rows = (overview?.attention ?? []).filter(
    (r) => mentions(needle, [r.title, r.device, r.session, r.agent ?? ""]),
  );
  if (rows.length === 0) return null;
  return (
    <section class="attention" aria-labelledby="attention-h">
      <h2 id="attention-h">Sessions needing attention</h2>
      <div class="table-wrap">
        <table class="cards">
          <thead>
            <tr>
              <th>Session</th>
              <th>State</th>
              <th>Agent</th>
              <th>Device</th>
              <th>Last contact</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.session} data-session={r.session}>
                <td data-label="Session">
                  <a href={`/sessions/${r.session}`}>{r.title}</a>
                </td>
                <td data-label="State">
                  <span class="cell">
                    <OutcomeBadge outcome={r.outcome} /> <span class="badge warning" title={r.explanation}>
                      {r.flag}
                    </span>
                  </span>
                </td>
                <td data-label="Agent">
                  <AgentLink name={r.agent} />
                </td>
                <td data-label="Device">{r.device}</td>
                <td data-label="Last contact" title={r.last_contact_at ? when(r.last_contact_at) : undefined}>
                  {ago(r.last_contact_at)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

/** A sandbox's row; when its run waits on a person for things `items` lists, its
 *  badge opens a panel under the row with what you can do about them. */
function Row({ b, items, open, toggle, reloadInbox }: { b: Sandbox; items: InboxItem[]; open: boolean; toggle: () => void; reloadInbox: () => void }) {
  const run = b.last_run;
  // Sessions started before untitled ones were named after their program have no title.
  const title = b.working_on || "Untitled session";
  const acts = run && items.length > 0;
  return (
    <>
      <tr data-sandbox={b.id} data-session={run?.id ?? ""}>
        <td data-label="Type">
          <span class="cell">
            <TypeBadges kind={b.kind} taskType={b.task_type} />
          </span>
        </td>
        <td data-label="State">
          <span class="cell">
            <LiveDot live={run?.outcome === "running"} /> <StateBadge state={b.state} live={b.live} />
            {!b.live && run && (
              <>
                {" "}
                <OutcomeBadge outcome={run.outcome} prefix="last run" />
              </>
            )}
            {acts ? (
              <>
                {" "}
                <NeedsToggle id={run.id} label={b.waiting ?? items[0].words} open={open} onToggle={toggle} />
              </>
            ) : b.waiting && (
              <>
                {" "}
                <a class="badge warning" href="/inbox" data-testid="waiting" title="Its run waits on a person: answer it on Needs you">
                  {b.waiting}
                </a>
              </>
            )}
            {b.warning && (
              <>
                {" "}
                <span class="badge warning" title="A run is still live although its task has ended: stop it, or Finish the sandbox">
                  {b.warning}
                </span>
              </>
            )}
          </span>
        </td>
        <td data-label="Agent">
          <AgentLink name={b.agent} />
        </td>
        <td data-label="Working on" class="working-on" title={title}>
          {run ? <a href={`/sessions/${run.id}`}>{title}</a> : title}
        </td>
        <td data-label="Device">
          <a href={`/devices/${enc(b.device)}`}>{b.device}</a>
        </td>
        <td data-label="Repo">
          <RepoLink name={b.repo} />
        </td>
        <td data-label="Cost">
          <span class="cost">
            <span title={exactUsd(b.cost_usd, b.cost_unknown)}>{usd(b.cost_usd, b.cost_unknown)}</span>
            {(b.task_cost_usd != null || b.task_cost_unknown) && (
              <span class="sub" data-testid="task-cost" title={`Lifetime spend of its task, every sandbox${b.task_cost_unknown ? "" : ": " + exactUsd(b.task_cost_usd)}`}>
                task {usd(b.task_cost_usd, b.task_cost_unknown)}
              </span>
            )}
          </span>
        </td>
        <td data-label="Actions" class="actions">
          {b.live && run && run.can_drop_in ? (
            <a class="button primary" href={`/sessions/${run.id}`}>
              ▶ Drop in
            </a>
          ) : run ? (
            <a href={`/sessions/${run.id}`}>
              Last run{b.runs > 1 ? ` · ${b.runs} runs` : ""}
            </a>
          ) : (
            "—"
          )}
        </td>
      </tr>
      {acts && open && <NeedsRow id={run.id} items={items} columns={8} onDone={reloadInbox} />}
    </>
  );
}

export function SessionsPage() {
  const loc = useLocation();
  const filter = (["live", "open", "all"].includes(loc.searchParams.get("filter") ?? "") ? loc.searchParams.get("filter") : "live") as Filter;
  const q = loc.searchParams.get("q") ?? "";
  const [typed, setTyped] = useState(q);
  const [rows, setRows] = useState<Sandbox[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const [done, setDone] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // Which list (filter and search) the rows were looked up for: "nothing matches" is said
  // only once this list was looked through, never on the render before its first request.
  const [listed, setListed] = useState<string | null>(null);
  const [overview, setOverview] = useState<Overview | null>(null);
  // What waits on a person, matched to rows by their last run (loaded with the list).
  const [inbox, setInbox] = useState<InboxItem[]>([]);
  const [open, toggle] = useOpenRows();
  const generation = useRef(0);
  const sentinel = useRef<HTMLDivElement>(null);
  const state = useRef({ filter, q, cursor, loading, done });
  state.current = { filter, q, cursor, loading, done };

  const setParams = (f: Filter, query: string) => {
    const p = new URLSearchParams();
    if (f !== "live") p.set("filter", f);
    if (query.trim()) p.set("q", query.trim());
    const s = p.toString();
    navigate(`/sessions${s ? "?" + s : ""}`, true);
  };

  /** Loads the next batch, or with `reset` the list from its start. A reset that `keeps`
   *  (a resync, not a new filter or search) leaves the rows in view until the fresh list
   *  is complete, so a match found a moment ago never blinks out while the list is looked
   *  through again. */
  const loadBatch = async (reset: boolean, keep = false) => {
    const st = state.current;
    if (!reset && (st.loading || st.done)) return;
    const gen = reset ? ++generation.current : generation.current;
    setLoading(true);
    const p = new URLSearchParams({ filter: st.filter, limit: String(BATCH) });
    if (st.q.trim()) p.set("q", st.q.trim());
    let cursor = reset ? null : st.cursor;
    // A reset's rows so far: they replace what is shown.
    let fresh: Sandbox[] = [];
    try {
      // A search of one or two characters looks through part of the list per request,
      // which may find less than a batch, or nothing, and go on: ask again until a
      // batch's worth has come or the list ends.
      for (let found = 0, asked = 0; ; asked++) {
        if (cursor) p.set("cursor", cursor);
        const list = await api<SandboxList>(`/api/v1/sandboxes?${p}`);
        if (gen !== generation.current) return;
        found += list.sandboxes.length;
        cursor = list.next_cursor;
        const last = cursor === null || found >= BATCH;
        if (reset) {
          fresh = merged(fresh, list.sandboxes);
          const shown = fresh;
          if (!keep || last) setRows(() => shown);
        } else {
          setRows((old) => merged(old, list.sandboxes));
        }
        if (last) break;
      }
      setCursor(cursor);
      setDone(cursor === null);
      setListed(listKey(st.filter, st.q));
      setError(null);
    } catch (e) {
      if (gen === generation.current) setError(errorText(e));
    } finally {
      if (gen === generation.current) setLoading(false);
    }
  };

  const loadOverview = () => api<Overview>("/api/v1/overview").then(setOverview, () => {});
  const reloadInbox = () => loadInbox().then(setInbox, () => {});
  const overviewTimer = useRef<number | null>(null);

  useEffect(() => {
    setTyped(q);
    setRows([]);
    setCursor(null);
    setDone(false);
    loadBatch(true);
    reloadInbox();
  }, [filter, q]);

  useEffect(() => {
    loadOverview();
  }, []);

  // Debounced search: the URL holds the query, so reload and back keep it.
  useEffect(() => {
    if (typed === q) return;
    const t = setTimeout(() => setParams(filter, typed), 250);
    return () => clearTimeout(t);
  }, [typed]);

  // More rows as the bottom of the list comes into view.
  useEffect(() => {
    const el = sentinel.current;
    if (!el) return;
    const io = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) loadBatch(false);
    });
    io.observe(el);
    return () => io.disconnect();
  }, [sentinel.current]);

  useEffect(
    () => () => {
      if (overviewTimer.current !== null) window.clearTimeout(overviewTimer.current);
    },
    [],
  );

  // Live updates: refresh the one row a change concerns.
  useEffect(
    () =>
      subscribe(async (m) => {
        if (m.kind === "resync") {
          loadOverview();
          reloadInbox();
          loadBatch(true, true);
          return;
        }
        const session = m.kind === "activity" ? m.event.session : m.session;
        setOverview((o) => (o ? { ...o, running: m.running } : o));
        // The header badges and Sessions needing attention follow too (at most a few
        // reloads a second, however busy the stream).
        if (overviewTimer.current === null) {
          overviewTimer.current = window.setTimeout(() => {
            overviewTimer.current = null;
            loadOverview();
            reloadInbox();
          }, 300);
        }
        if (!session) return;
        let list: SandboxList;
        try {
          list = await api<SandboxList>(`/api/v1/sandboxes?filter=all&limit=1&q=${enc(session)}`);
        } catch {
          return;
        }
        const b = list.sandboxes[0];
        if (!b) return;
        const { filter: f, q: query, done: complete } = state.current;
        setRows((old) => {
          const known = old.some((o) => o.id === b.id);
          const fits = matches(b, f);
          // A row joins when the search (a substring of the title, device or id, as on
          // the server) lets it in, at its place in the order.
          const found = known || mentions(query.trim().toLowerCase(), [b.working_on, b.device, b.id, b.last_run?.id ?? ""]);
          const rows = fits && found ? placed(old, b, complete) : old.filter((o) => o.id !== b.id);
          return sameTaskTotals(rows, b);
        });
      }),
    [],
  );

  const badges = overview && (
    <div class="header-badges">
      {overview.queued > 0 && (
        <a class="badge info" href="/tasks" title="Task runs waiting for a device slot; each starts when a slot frees. They are on the Tasks page.">
          {overview.queued} queued for a slot
        </a>
      )}
      {overview.on_finished_tasks > 0 && (
        <span class="badge warning" title="Sessions still open although their task already finished">
          {overview.on_finished_tasks} on finished tasks
        </span>
      )}
      {overview.stale > 0 && (
        <span class="badge warning" title="Live sessions flagged stale: see Sessions needing attention">
          {overview.stale} stale
        </span>
      )}
    </div>
  );

  // This list was looked through and nothing is loading: an empty result is the answer.
  const looked = !loading && listed === listKey(filter, q);

  return (
    <section class="page">
      <header class="page-header">
        <h1>Sessions</h1>
        {badges}
      </header>
      <div class="filter-bar" role="search">
        <div class="segmented" role="group" aria-label="Which sandboxes">
          {(["live", "open", "all"] as Filter[]).map((f) => (
            <button type="button" class={f === filter ? "seg current" : "seg"} aria-pressed={f === filter} onClick={() => setParams(f, typed)}>
              {f === "live" ? "Live" : f === "open" ? "Open" : "All"}
            </button>
          ))}
        </div>
        <input
          type="search"
          class="search"
          placeholder="Search title, device or id"
          aria-label="Search sessions"
          value={typed}
          maxLength={200}
          onInput={(e) => setTyped((e.target as HTMLInputElement).value)}
        />
      </div>
      <Attention overview={overview} q={q} />
      <h2 class="list-heading">{HEADINGS[filter]}</h2>
      {error && <p class="error">{error}</p>}
      <div class="table-wrap">
        <table class="sandboxes">
          {/* Fixed column widths: rows that load later never reflow the ones in view. */}
          <colgroup>
            {["type", "state", "agent", "working-on", "device", "repo", "cost", "actions"].map((c) => (
              <col class={`col-${c}`} />
            ))}
          </colgroup>
          <thead>
            <tr>
              <th>Type</th>
              <th>State</th>
              <th>Agent</th>
              <th>Working on</th>
              <th>Device</th>
              <th>Repo</th>
              <th>Cost</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((b) => (
              <Row
                key={b.id}
                b={b}
                items={b.last_run ? inbox.filter((i) => i.session === b.last_run?.id) : []}
                open={open.has(b.id)}
                toggle={() => toggle(b.id)}
                reloadInbox={reloadInbox}
              />
            ))}
          </tbody>
        </table>
      </div>
      {looked && rows.length === 0 && !error && q && (
        <p class="empty" data-testid="empty">
          {`Nothing ${filter === "live" ? "running now " : filter === "open" ? "open " : ""}matches “${q}”.`}{" "}
          <button type="button" class="button" onClick={() => setParams(filter, "")}>
            Clear the search
          </button>
        </p>
      )}
      {looked && rows.length === 0 && !error && !q && (
        <p class="empty" data-testid="empty">
          {filter === "live" ? "Nothing is running right now." : "No sandboxes yet."} Start one with <code>drover session start --device NAME -- COMMAND</code>.
        </p>
      )}
      <div ref={sentinel} class="sentinel" />
      {!done && rows.length > 0 && (
        <p class="load-more">
          <a
            href="#"
            onClick={(e) => {
              e.preventDefault();
              loadBatch(false);
            }}
          >
            {loading ? "Loading…" : "Load more"}
          </a>
        </p>
      )}
    </section>
  );
}
