// Formatting of times, durations and money for people.

export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "—";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return "—";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 45) return "just now";
  if (s < 90) return "1 min ago";
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.round(m / 60);
  if (h < 24) return `${h} h ago`;
  const d = Math.round(h / 24);
  return `${d} d ago`;
}

export function when(iso: string | null | undefined): string {
  if (!iso) return "—";
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return "—";
  return t.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

export function duration(secs: number | null | undefined): string {
  if (secs == null) return "—";
  const s = Math.round(secs);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${m % 60}m`;
}

/* Money. One rule everywhere: to the cent, rounded half up ($0.43, $1.20, $12.00); a
   positive amount under half a cent reads "<$0.01". `exactUsd` gives the precise figure
   for a tooltip. Amounts are whole nano-dollars (the API's `*_nano`) or USD numbers. */

const NANO = 1e9;
const toNano = (v: number) => Math.round(v * NANO);

/** Nano-dollars to the cent: "$0.43", or "<$0.01" for a positive amount under half a cent. */
export function money(nano: number): string {
  const cents = Math.floor((nano + 5e6) / 1e7);
  if (cents === 0 && nano > 0) return "<$0.01";
  return `$${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`;
}

/** Nano-dollars to the last digit that is not zero, at least to the cent: "$0.00975". */
export function moneyExact(nano: number): string {
  const whole = Math.floor(nano / NANO);
  const frac = String(nano % NANO).padStart(9, "0").replace(/0+$/, "").padEnd(2, "0");
  return `$${whole}.${frac}`;
}

/** A USD amount (the API's `*_usd`) to the cent; "unknown" for a model with no price. */
export function usd(v: number | null | undefined, unknown = false): string {
  if (unknown) return "unknown";
  if (v == null) return "—";
  return money(toNano(v));
}

/** The exact figure behind `usd`, for a title; undefined when there is none. */
export function exactUsd(v: number | null | undefined, unknown = false): string | undefined {
  if (unknown || v == null) return undefined;
  return `exactly ${moneyExact(toNano(v))}`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** "code" → "Code": stage names, states and outcomes as labels. */
export const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
