// The outcome words' explanations, as the server serves them once (GET /api/v1/outcomes):
// loaded before the app first renders, so every badge's hover text is the server's.

import { api } from "./api";
import type { Outcome, OutcomeGuide } from "./types";

let explanations: Partial<Record<Outcome, string>> = {};

/** Loads the explanations; a failure leaves them empty (badges still show the word). */
export async function loadOutcomes(): Promise<void> {
  try {
    const guide = await api<OutcomeGuide>("/api/v1/outcomes");
    explanations = Object.fromEntries(guide.outcomes.map((w) => [w.outcome, w.explanation]));
  } catch {
    explanations = {};
  }
}

/** What `o` means, for a badge's hover text and the ended terminal's pill. */
export function outcomeHelp(o: Outcome): string {
  return explanations[o] ?? "";
}
