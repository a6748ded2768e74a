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

export function usd(v: number | null | undefined, unknown = false): string {
  if (unknown) return "unknown";
  if (v == null) return "—";
  return v < 0.01 && v > 0 ? "<$0.01" : `$${v.toFixed(2)}`;
}

/** A precise amount for a run's Cost row, from whole nano-dollars, rounded half up
 * in integers ($0.0098 for 9,750,000): to the cent from $1, else to 1/100 cent. */
export function usdExact(nano: number): string {
  const unit = nano >= 1e9 ? 1e7 : 1e5; // nano-dollars per shown digit
  const digits = unit === 1e7 ? 2 : 4;
  const n = Math.floor((nano + unit / 2) / unit);
  const scale = 10 ** digits;
  return `$${Math.floor(n / scale)}.${String(n % scale).padStart(digits, "0")}`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/** "code" → "Code": stage names, states and outcomes as labels. */
export const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
