// The server's live update stream (server-sent events): activity events, changes, and
// the running-session count. EventSource reconnects by itself and resumes with
// Last-Event-ID, so nothing is missed. Each message is checked against the API contract
// before use (validate.ts): one that does not match is dropped and logged.

import type { ActivityEvent, StreamChanged, StreamUpdate } from "./types";
import { parseMessage } from "./validate";

export type LiveMessage =
  | { kind: "activity"; event: ActivityEvent; running: number }
  | { kind: "changed"; session: string | null; running: number }
  | { kind: "resync" };

type Listener = (m: LiveMessage) => void;
const listeners = new Set<Listener>();
let source: EventSource | null = null;

function ensure() {
  if (source) return;
  source = new EventSource("/api/v1/stream");
  // What a page loaded just before the stream opened could have missed: reload once.
  // (Later reconnects resume with Last-Event-ID and miss nothing.)
  let opened = false;
  source.addEventListener("open", () => {
    if (!opened) emit({ kind: "resync" });
    opened = true;
  });
  source.addEventListener("activity", (e) => {
    const d = parseMessage<StreamUpdate>("StreamUpdate", (e as MessageEvent).data);
    if (d) emit({ kind: "activity", event: d.event, running: d.running });
  });
  source.addEventListener("changed", (e) => {
    const d = parseMessage<StreamChanged>("StreamChanged", (e as MessageEvent).data);
    if (d) emit({ kind: "changed", session: d.session ?? null, running: d.running });
  });
  source.addEventListener("resync", () => emit({ kind: "resync" }));
}

function emit(m: LiveMessage) {
  for (const f of listeners) f(m);
}

export function subscribe(f: Listener): () => void {
  ensure();
  listeners.add(f);
  return () => listeners.delete(f);
}

export function closeLive() {
  source?.close();
  source = null;
}
