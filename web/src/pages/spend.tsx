// Spend: the workspace's model spend, read from the harnesses' own records — this month
// against its cap (owners and admins can set it), a chart by day, and tables by agent and
// by model. "unknown" marks spend on models with no price: the figure shown is then a floor.

import { useEffect, useState } from "preact/hooks";
import { api, errorText } from "../api";
import { exactUsd, usd } from "../format";
import { subscribe } from "../live";
import type { Me } from "../types";

interface Row { key: string; usd: number; unknown: boolean; turns: number; tokens: number; runs: number }
interface Report { since: string; cap_usd: number | null; month_usd: number; by_agent: Row[]; by_model: Row[]; by_day: Row[] }


/** Every day from `since` to today (UTC), with the days that had spend filled in. */
function allDays(since: string, rows: Row[]): Row[] {
  const out: Row[] = [];
  const byKey = new Map(rows.map((r) => [r.key, r]));
  const end = new Date().toISOString().slice(0, 10);
  for (let d = new Date(since.slice(0, 10) + "T00:00:00Z"); out.length < 400; d.setUTCDate(d.getUTCDate() + 1)) {
    const key = d.toISOString().slice(0, 10);
    out.push(byKey.get(key) ?? { key, usd: 0, unknown: false, turns: 0, tokens: 0, runs: 0 });
    if (key >= end) break;
  }
  return out;
}
const amount = (r: Row) => `${usd(r.usd)}${r.unknown ? " + unknown" : ""}`;

/** Spend per day as bars (an SVG the page draws itself; no chart library). */
function DayChart({ since, rows }: { since: string; rows: Row[] }) {
  if (rows.length === 0) return <p class="empty">No spend recorded yet.</p>;
  const days = allDays(since, rows);
  const max = Math.max(...days.map((d) => d.usd), 0.01);
  const w = 24;
  const h = 120;
  const label = rows.map((d) => `${d.key}: ${amount(d)}`).join("; ");
  return (
    <svg class="chart" role="img" aria-label={`Spend by day: ${label}`} viewBox={`0 0 ${days.length * w} ${h + 18}`} data-testid="spend-chart">
      {days.map((d, i) => {
        const bh = d.usd > 0 ? Math.max(1, (d.usd / max) * h) : 0;
        return (
          <g key={d.key}>
            <rect x={i * w + 3} y={h - bh} width={w - 6} height={bh} class={d.unknown ? "bar unknown" : "bar"}>
              <title>{`${d.key}: ${amount(d)} · ${d.turns} turns · ${d.runs} runs`}</title>
            </rect>
            <text x={i * w + w / 2} y={h + 14} text-anchor="middle" class="axis">
              {d.key.slice(8)}
            </text>
          </g>
        );
      })}
    </svg>
  );
}

function Table({ title, rows }: { title: string; rows: Row[] }) {
  return (
    <div class="table-wrap">
      <table class="tasks" aria-label={`Spend by ${title}`}>
        <thead>
          <tr>
            <th>{title}</th>
            <th>Cost</th>
            <th>Turns</th>
            <th>Tokens</th>
            <th>Runs</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.key}>
              <td data-label={title}>{r.key}</td>
              <td data-label="Cost">{amount(r)}</td>
              <td data-label="Turns">{r.turns}</td>
              <td data-label="Tokens">{r.tokens.toLocaleString()}</td>
              <td data-label="Runs">{r.runs}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function CapForm({ cap, onSaved }: { cap: number | null; onSaved: () => void }) {
  const [value, setValue] = useState(cap == null ? "" : String(cap));
  const [error, setError] = useState<string | null>(null);
  const save = async (e: Event) => {
    e.preventDefault();
    const usd = value.trim() === "" ? null : Number(value);
    if (usd != null && (!Number.isFinite(usd) || usd < 0)) {
      setError("The cap is an amount in USD, 0 or more (empty for none).");
      return;
    }
    try {
      await api("/api/v1/spend/cap", { method: "PUT", json: { usd } });
      setError(null);
      onSaved();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form class="send-row" aria-label="Monthly cap" onSubmit={save}>
      <label>
        Monthly cap (USD, empty for none){" "}
        <input class="search cap" inputMode="decimal" value={value} onInput={(e) => setValue((e.target as HTMLInputElement).value)} />
      </label>
      <button class="button" type="submit">
        Save cap
      </button>
      {error && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </form>
  );
}

export function SpendPage({ me }: { me: Me | null }) {
  const [report, setReport] = useState<Report | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => api<Report>("/api/v1/spend?days=30").then(setReport, (e) => setError(errorText(e)));
  useEffect(() => {
    load();
    // Runs report usage every few seconds each: reload at most every 3 s.
    let timer: number | undefined;
    const unsubscribe = subscribe((m) => {
      if ((m.kind === "changed" || m.kind === "resync") && timer === undefined) {
        timer = window.setTimeout(() => {
          timer = undefined;
          load();
        }, 3000);
      }
    });
    return () => {
      unsubscribe();
      window.clearTimeout(timer);
    };
  }, []);
  const admin = me?.role === "owner" || me?.role === "admin";
  return (
    <section class="page">
      <h1>Spend</h1>
      {error && <p class="error">{error}</p>}
      {report && (
        <>
          <p class="meta" data-testid="month">
            This month: <strong title={exactUsd(report.month_usd)}>{usd(report.month_usd)}</strong>
            {report.cap_usd != null ? ` of a ${usd(report.cap_usd)} monthly cap — reaching it stops the run that spends` : " (no monthly cap)"}
          </p>
          {admin && <CapForm cap={report.cap_usd} onSaved={load} />}
          <h2>Last 30 days</h2>
          <DayChart since={report.since} rows={report.by_day} />
          <h2>By agent</h2>
          <Table title="Agent" rows={report.by_agent} />
          <h2>By model</h2>
          <Table title="Model" rows={report.by_model} />
        </>
      )}
    </section>
  );
}
