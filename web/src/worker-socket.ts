// The page's side of the terminal's socket worker (socket-worker.ts): a WebSocket with
// only what the live terminal uses.

import { Kind, Ring, SEQ } from "./ring";

/** What the worker posts when there is no ring. */
type Told = { ev: "open" } | { ev: "message"; data: string | ArrayBuffer } | { ev: "close" };

/** How long the page reads a busy ring before it lets its other work run. */
const READ_SLICE_MS = 8;

/** Whether this page may share memory with the worker and wait on it without blocking. */
const canShare = () => typeof SharedArrayBuffer === "function" && self.crossOriginIsolated && typeof Atomics.waitAsync === "function";

/** A WebSocket opened and read in a worker, whose messages reach the page as they arrive,
 * even right after a key press (see ring.ts). */
export class WorkerSocket {
  /** The socket is open: what is sent now goes out. */
  open = false;
  /** A message: text, or binary. */
  onmessage: (data: string | Uint8Array) => void = () => {};
  /** The socket closed (or never opened); called once. */
  onclose: () => void = () => {};
  private worker: Worker;
  private ring: Ring | null = canShare() ? Ring.create() : null;
  /** The parts of a text message taken so far. */
  private text: Uint8Array[] = [];
  private decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  /** Closed, or closing: nothing more is handed on. */
  private closing = false;
  private closed = false;
  private closeTimer: number | undefined;

  constructor(url: string) {
    this.worker = new Worker("/socket.js");
    this.worker.onmessage = (m: MessageEvent<Told>) => {
      const told = m.data;
      if (told.ev === "message") this.deliver(typeof told.data === "string" ? told.data : new Uint8Array(told.data));
      else if (told.ev === "open") this.opened();
      else this.ended();
    };
    this.worker.onerror = () => this.ended();
    this.worker.postMessage({ op: "open", url, ring: this.ring?.buffer });
    if (this.ring) this.read(this.ring);
  }

  /** Sends a frame: text as a text frame, bytes as a binary one. Dropped unless open. */
  send(data: string | Uint8Array) {
    if (this.open) this.worker.postMessage({ op: "send", data });
  }

  /** Closes the socket; `onclose` follows. */
  close() {
    if (this.closing) return;
    this.closing = true;
    this.open = false;
    this.worker.postMessage({ op: "close" });
    // The worker closes the socket cleanly, then is gone with it.
    this.closeTimer = window.setTimeout(() => this.ended(), 1_000);
  }

  /** Takes the ring's records as they come, until the socket is gone. */
  private async read(ring: Ring) {
    let seen = Atomics.load(ring.index, SEQ);
    let since = performance.now();
    for (;;) {
      ring.take((kind, payload) => {
        try {
          this.record(kind, payload);
        } catch (e) {
          // A handler's failure is reported; the records after it still come.
          reportError(e);
        }
      });
      if (this.closed) return;
      const r = Atomics.waitAsync(ring.index, SEQ, seen);
      if (r.async) {
        await r.value;
        since = performance.now();
      } else if (performance.now() - since > READ_SLICE_MS) {
        // More keeps coming (a stream): the page's other work goes first.
        await new Promise((ok) => setTimeout(ok));
        since = performance.now();
      }
      seen = Atomics.load(ring.index, SEQ);
    }
  }

  /** One record from the ring. */
  private record(kind: Kind, payload: Uint8Array) {
    switch (kind) {
      case Kind.Open:
        return this.opened();
      case Kind.Binary:
        return this.deliver(payload);
      case Kind.TextPart:
        this.text.push(payload);
        return;
      case Kind.TextEnd: {
        this.text.push(payload);
        const text = this.decoder.decode(concat(this.text));
        this.text = [];
        return this.deliver(text);
      }
      case Kind.Close:
        return this.ended();
    }
  }

  private opened() {
    if (!this.closing) this.open = true;
  }

  /** Hands a message on, unless the socket is closing (as a WebSocket drops them then). */
  private deliver(data: string | Uint8Array) {
    if (!this.closing) this.onmessage(data);
  }

  private ended() {
    if (this.closed) return;
    this.closed = this.closing = true;
    this.open = false;
    window.clearTimeout(this.closeTimer);
    this.worker.terminate();
    // Wakes `read` if it waits, which then stops.
    if (this.ring) Atomics.notify(this.ring.index, SEQ);
    this.onclose();
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
