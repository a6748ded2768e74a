// A byte ring in a SharedArrayBuffer: the terminal's socket worker (socket-worker.ts)
// writes the socket's messages into it and the page (worker-socket.ts) takes them out,
// woken by `Atomics.waitAsync`.
//
// Why not postMessage: after a key press Chromium defers every task of the page, posted
// messages included, until its next frame, so a keystroke's echo waited for that frame
// and was drawn one frame later still. An `Atomics.waitAsync` wake-up is not a task of
// the page and is not deferred: the echo is parsed as it arrives and drawn in the next
// frame. The page must be cross-origin isolated for this (the server sends COOP and
// COEP); without that the worker falls back to posted messages.
//
// One writer (the worker) and one reader (the page). Each record is its length (4 bytes,
// little-endian), its kind (1 byte) and its bytes; records wrap around the end.

/** What a record carries. */
export enum Kind {
  /** Terminal output (a binary message, or part of a large one). */
  Binary = 0,
  /** Part of a text message; more parts follow. */
  TextPart = 1,
  /** The last (or only) part of a text message. */
  TextEnd = 2,
  /** The socket opened. */
  Open = 3,
  /** The socket closed; nothing follows. */
  Close = 4,
}

/** The ring's size; a power of two, so positions may wrap at 2³². */
export const RING_BYTES = 1 << 21;
/** The largest record payload: larger messages are cut into parts. */
export const PART_BYTES = 1 << 16;
const RECORD_HEADER = 5;
/** Slots of the index array: a counter bumped after each write (what the reader waits
 * on), where the writer is, and where the reader is (what the writer waits on). */
export const SEQ = 0;
const HEAD = 1;
export const TAIL = 2;

/** The ring over a shared buffer made by `Ring.create` (on either side). */
export class Ring {
  /** SEQ, HEAD and TAIL; positions are byte counts modulo 2³². */
  readonly index: Int32Array;
  private bytes: Uint8Array;

  constructor(readonly buffer: SharedArrayBuffer) {
    this.index = new Int32Array(buffer, 0, 3);
    this.bytes = new Uint8Array(buffer, 16, RING_BYTES);
  }

  /** A new, empty ring. */
  static create(): Ring {
    return new Ring(new SharedArrayBuffer(16 + RING_BYTES));
  }

  /** Where the reader is: the writer waits for this to move when the ring is full. */
  tail(): number {
    return Atomics.load(this.index, TAIL);
  }

  /** Writer: appends one record (payload at most PART_BYTES) if it fits, and wakes the
   * reader; false if the ring is too full for now. */
  put(kind: Kind, payload: Uint8Array): boolean {
    const head = Atomics.load(this.index, HEAD) >>> 0;
    const used = (head - (this.tail() >>> 0)) >>> 0;
    if (used + RECORD_HEADER + payload.length > RING_BYTES) return false;
    const n = payload.length;
    this.copyIn(head, Uint8Array.of(n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, n >>> 24, kind));
    this.copyIn(head + RECORD_HEADER, payload);
    Atomics.store(this.index, HEAD, (head + RECORD_HEADER + n) | 0);
    Atomics.add(this.index, SEQ, 1);
    Atomics.notify(this.index, SEQ);
    return true;
  }

  /** Reader: hands over every record written so far (payloads are copies), then frees
   * their room and wakes the writer. */
  take(each: (kind: Kind, payload: Uint8Array) => void): void {
    let tail = this.tail();
    let left = (Atomics.load(this.index, HEAD) - tail) >>> 0;
    if (left > RING_BYTES) throw new Error(`the ring's positions are corrupt: ${left} bytes written and unread`);
    while (left > 0) {
      const h = this.copyOut(tail, RECORD_HEADER);
      const n = (h[0] | (h[1] << 8) | (h[2] << 16) | (h[3] << 24)) >>> 0;
      if (RECORD_HEADER + n > left) throw new Error(`a ring record of ${n} bytes runs past what was written`);
      const payload = this.copyOut(tail + RECORD_HEADER, n);
      tail = (tail + RECORD_HEADER + n) | 0;
      left -= RECORD_HEADER + n;
      Atomics.store(this.index, TAIL, tail);
      Atomics.notify(this.index, TAIL);
      each(h[4] as Kind, payload);
    }
  }

  private copyIn(pos: number, data: Uint8Array) {
    const at = pos & (RING_BYTES - 1);
    const first = Math.min(data.length, RING_BYTES - at);
    this.bytes.set(data.subarray(0, first), at);
    this.bytes.set(data.subarray(first), 0);
  }

  private copyOut(pos: number, n: number): Uint8Array {
    const at = pos & (RING_BYTES - 1);
    const out = new Uint8Array(n);
    const first = Math.min(n, RING_BYTES - at);
    out.set(this.bytes.subarray(at, at + first));
    out.set(this.bytes.subarray(0, n - first), first);
    return out;
  }
}

/** The writer's side: records queued in order and written as the ring has room, cut
 * into parts of at most PART_BYTES (a text message's parts are TextPart, then TextEnd). */
export class RingWriter {
  private queue: [Kind, Uint8Array][] = [];
  private waiting = false;

  constructor(private ring: Ring) {}

  /** Queues one message (or event) and writes what fits. */
  write(kind: Kind, payload: Uint8Array = new Uint8Array(0)) {
    const last = kind === Kind.TextPart ? Kind.TextEnd : kind;
    for (let at = 0; at === 0 || at < payload.length; at += PART_BYTES) {
      const end = Math.min(payload.length, at + PART_BYTES);
      this.queue.push([end < payload.length ? kind : last, payload.subarray(at, end)]);
    }
    this.flush();
  }

  /** Records queued and not yet in the ring. */
  get queued(): number {
    return this.queue.length;
  }

  /** Writes what is queued while the ring has room; else waits for the reader. */
  private flush() {
    while (this.queue.length && !this.waiting) {
      const tail = this.ring.tail();
      if (this.ring.put(...this.queue[0])) {
        this.queue.shift();
        continue;
      }
      const r = Atomics.waitAsync(this.ring.index, TAIL, tail);
      if (!r.async) continue; // the reader moved meanwhile
      this.waiting = true;
      r.value.then(() => {
        this.waiting = false;
        this.flush();
      });
    }
  }
}
