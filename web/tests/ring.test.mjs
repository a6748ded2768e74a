// The shared ring that carries the live terminal's messages from its socket worker to
// the page (src/ring.ts). Bundled with esbuild, run in node: records come out whole and
// in order across the ring's end and past 2³², a full ring refuses until read, and the
// worker's writer streaming far more than the ring holds loses and reorders nothing.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import * as esbuild from "esbuild";

let r;
let bundle;
before(async () => {
  bundle = join(mkdtempSync(join(tmpdir(), "drover-ring-")), "ring.mjs");
  await esbuild.build({ entryPoints: ["src/ring.ts"], bundle: true, format: "esm", platform: "node", outfile: bundle, logLevel: "warning" });
  r = await import(bundle);
});

const bytes = (n, seed) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff);

test("records come out whole and in order, also across the ring's end", () => {
  const ring = r.Ring.create();
  const reader = new r.Ring(ring.buffer);
  const got = [];
  // Sizes that do not divide the ring: records straddle its end many times over.
  for (let i = 0; i < 200; i++) {
    const payload = bytes(i % 2 ? r.PART_BYTES : 12_345 + i, i);
    assert.ok(ring.put(i % 3 ? r.Kind.Binary : r.Kind.TextEnd, payload));
    reader.take((kind, p) => got.push([kind, p]));
    assert.equal(got.length, i + 1);
    assert.equal(got[i][0], i % 3 ? r.Kind.Binary : r.Kind.TextEnd);
    assert.deepEqual(got[i][1], payload);
  }
  // An empty record (an open, a close) is a record too.
  assert.ok(ring.put(r.Kind.Close, new Uint8Array(0)));
  reader.take((kind, p) => got.push([kind, p]));
  assert.deepEqual(got.at(-1), [r.Kind.Close, new Uint8Array(0)]);
});

test("positions wrap at 2³² without losing a record", () => {
  const ring = r.Ring.create();
  // Writer and reader a little short of 2³² (slots 1 and 2: where each stands).
  const start = (2 ** 32 - 3 * r.PART_BYTES) | 0;
  Atomics.store(ring.index, 1, start);
  Atomics.store(ring.index, r.TAIL, start);
  for (let i = 0; i < 50; i++) {
    const payload = bytes(r.PART_BYTES - i, i);
    assert.ok(ring.put(r.Kind.Binary, payload));
    const got = [];
    ring.take((_, p) => got.push(p));
    assert.deepEqual(got, [payload]);
  }
  assert.ok(ring.tail() >>> 0 < start >>> 0, "the reader went past 2³²");
});

test("a full ring refuses a record until the reader frees room, and loses none", () => {
  const ring = r.Ring.create();
  let put = 0;
  while (ring.put(r.Kind.Binary, bytes(r.PART_BYTES, put))) put++;
  assert.equal(put, Math.floor(r.RING_BYTES / (r.PART_BYTES + 5)));
  assert.equal(ring.put(r.Kind.Binary, bytes(r.PART_BYTES, put)), false);
  // The last bytes of room hold one more record exactly; then not even an empty one fits.
  const room = r.RING_BYTES - put * (r.PART_BYTES + 5);
  assert.ok(ring.put(r.Kind.Binary, bytes(room - 5, put)));
  assert.equal(ring.put(r.Kind.Close, new Uint8Array(0)), false);
  const tail = ring.tail();
  let taken = 0;
  ring.take((_, p) => assert.deepEqual(p, bytes(taken < put ? r.PART_BYTES : room - 5, taken++)));
  assert.equal(taken, put + 1);
  assert.notEqual(ring.tail(), tail);
  assert.ok(ring.put(r.Kind.Binary, bytes(r.PART_BYTES, put)));
});

test("a writer thread streaming 64 MB through it: every byte arrives, in order", { timeout: 60_000 }, async () => {
  const ring = r.Ring.create();
  const total = 64 * 1024 * 1024;
  const writer = join(bundle, "..", "writer.mjs");
  // The socket worker's writer (RingWriter): everything is queued at once, far more than
  // the ring holds, and written as the reader frees room. Every 97th message is text of
  // up to 200 KB, cut into parts.
  writeFileSync(
    writer,
    `import { workerData } from "node:worker_threads";
     import { Ring, RingWriter, Kind, PART_BYTES } from ${JSON.stringify(bundle)};
     const w = new RingWriter(new Ring(workerData.buffer));
     let sent = 0, n = 0;
     while (sent < ${total}) {
       const text = n % 97 === 0;
       const len = Math.min(${total} - sent, text ? 200_000 - n : 1 + ((n * 7919) % PART_BYTES));
       n++;
       const p = new Uint8Array(len);
       for (let i = 0; i < len; i++) p[i] = text ? 97 + ((sent + i) % 26) : (sent + i) % 251;
       w.write(text ? Kind.TextPart : Kind.Binary, p);
       sent += len;
     }
     w.write(Kind.Close);
     // Alive until the reader has taken the last record.
     const t = setInterval(() => w.queued === 0 && clearInterval(t), 5);`,
  );
  const w = new Worker(writer, { workerData: { buffer: ring.buffer } });
  let got = 0;
  let closed = false;
  let text = [];
  const check = (p, kind) => {
    for (let i = 0; i < p.length; i++) {
      const want = kind === "text" ? 97 + ((got + i) % 26) : (got + i) % 251;
      if (p[i] !== want) assert.fail(`byte ${got + i} is wrong`);
    }
    got += p.length;
  };
  let seen = Atomics.load(ring.index, r.SEQ);
  while (!closed) {
    ring.take((kind, p) => {
      if (kind === r.Kind.Close) closed = true;
      else if (kind === r.Kind.Binary) check(p, "binary");
      else if (kind === r.Kind.TextPart) text.push(p);
      else if (kind === r.Kind.TextEnd) {
        text.push(p);
        // 196,608 to 200,000 bytes: four parts, the last one TextEnd.
        assert.equal(text.length, 4);
        for (const part of text) check(part, "text");
        text = [];
      }
    });
    const wait = Atomics.waitAsync(ring.index, r.SEQ, seen);
    if (wait.async && !closed) await wait.value;
    seen = Atomics.load(ring.index, r.SEQ);
  }
  assert.equal(got, total);
  await w.terminate();
});
