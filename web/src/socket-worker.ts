// The live terminal's WebSocket, held in a dedicated worker (built to /socket.js).
//
// After a key press Chromium defers the page's tasks, WebSocket messages and posted
// messages among them, until its next frame. This worker reads the socket as messages
// arrive and writes them into a shared ring (ring.ts) that wakes the page without a
// deferred task. Where the page cannot share memory (not cross-origin isolated), it
// posts them instead. It only carries frames: what they mean is the page's business
// (terminal.ts).

/// <reference lib="webworker" />
import { Kind, PART_BYTES, Ring, TAIL } from "./ring";
declare const self: DedicatedWorkerGlobalScope;

/** What the page asks: open the socket (over a ring, or by posting), send a frame, close
 * it. */
type Ask = { op: "open"; url: string; ring?: SharedArrayBuffer } | { op: "send"; data: string | Uint8Array } | { op: "close" };

let ws: WebSocket | null = null;
let ring: Ring | null = null;
/** Records the ring had no room for yet, in order. */
const queue: [Kind, Uint8Array][] = [];
let waiting = false;
const encoder = new TextEncoder();

/** Passes one event to the page, in order with the ones before it. */
function tell(kind: Kind, payload: Uint8Array = new Uint8Array(0)) {
  if (!ring) {
    switch (kind) {
      case Kind.Open:
        return self.postMessage({ ev: "open" });
      case Kind.Close:
        return self.postMessage({ ev: "close" });
      default:
        return; // posted whole by `received`
    }
  }
  const last = kind === Kind.TextPart ? Kind.TextEnd : kind;
  for (let at = 0; at === 0 || at < payload.length; at += PART_BYTES) {
    const end = Math.min(payload.length, at + PART_BYTES);
    queue.push([end < payload.length ? kind : last, payload.subarray(at, end)]);
  }
  flush();
}

/** Writes what is queued while the ring has room; else waits for the page to read. */
function flush() {
  while (ring && queue.length && !waiting) {
    const tail = ring.tail();
    if (ring.put(...queue[0])) {
      queue.shift();
      continue;
    }
    const r = Atomics.waitAsync(ring.index, TAIL, tail);
    if (!r.async) continue; // the page read meanwhile
    waiting = true;
    r.value.then(() => {
      waiting = false;
      flush();
    });
  }
}

function received(e: MessageEvent<string | ArrayBuffer>) {
  if (ring) {
    if (typeof e.data === "string") tell(Kind.TextPart, encoder.encode(e.data));
    else tell(Kind.Binary, new Uint8Array(e.data));
  } else if (typeof e.data === "string") {
    self.postMessage({ ev: "message", data: e.data });
  } else {
    self.postMessage({ ev: "message", data: e.data }, [e.data]);
  }
}

self.onmessage = (m: MessageEvent<Ask>) => {
  const ask = m.data;
  switch (ask.op) {
    case "open":
      if (ws) return;
      ring = ask.ring ? new Ring(ask.ring) : null;
      ws = new WebSocket(ask.url);
      ws.binaryType = "arraybuffer";
      ws.onopen = () => tell(Kind.Open);
      ws.onmessage = received;
      ws.onclose = () => tell(Kind.Close);
      break;
    case "send":
      if (ws?.readyState === WebSocket.OPEN) ws.send(ask.data);
      break;
    case "close":
      ws?.close();
      break;
  }
};
