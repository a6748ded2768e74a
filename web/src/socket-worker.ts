// The live terminal's WebSocket, held in a dedicated worker (built to /socket.js).
//
// After a key press Chromium defers the page's tasks, WebSocket messages and posted
// messages among them, until its next frame. This worker reads the socket as messages
// arrive and writes them into a shared ring (ring.ts) that wakes the page without a
// deferred task. Where the page cannot share memory (not cross-origin isolated), it
// posts them instead. It only carries frames: what they mean is the page's business
// (terminal.ts).

/// <reference lib="webworker" />
import { Kind, Ring, RingWriter } from "./ring";
declare const self: DedicatedWorkerGlobalScope;

/** What the page asks: open the socket (over a ring, or by posting), send a frame, close
 * it. */
type Ask = { op: "open"; url: string; ring?: SharedArrayBuffer } | { op: "send"; data: string | Uint8Array } | { op: "close" };

let ws: WebSocket | null = null;
let ring: RingWriter | null = null;
const encoder = new TextEncoder();

/** Passes an open or a close to the page, in order with the messages before it. */
function tell(kind: Kind.Open | Kind.Close) {
  if (ring) ring.write(kind);
  else self.postMessage({ ev: kind === Kind.Open ? "open" : "close" });
}

function received(e: MessageEvent<string | ArrayBuffer>) {
  if (ring) {
    if (typeof e.data === "string") ring.write(Kind.TextPart, encoder.encode(e.data));
    else ring.write(Kind.Binary, new Uint8Array(e.data));
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
      ring = ask.ring ? new RingWriter(new Ring(ask.ring)) : null;
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
