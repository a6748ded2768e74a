// The live connections' messages are checked against the API contract before use
// (src/validate.ts): well-formed ones pass, and a malformed one is dropped with a log line,
// never thrown on. Bundled with esbuild, run in node: no server, no browser.

import { test, before } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as esbuild from "esbuild";

let v;
before(async () => {
  const out = join(mkdtempSync(join(tmpdir(), "drover-validate-")), "validate.mjs");
  await esbuild.build({ entryPoints: ["src/validate.ts"], bundle: true, format: "esm", platform: "node", outfile: out, logLevel: "warning" });
  v = await import(out);
});

const event = {
  seq: 3, id: "evt_1", kind: "session.started", label: "session started", actor: "ann",
  session: null, task: null, session_title: null, task_title: null, detail: {}, at: "2026-12-02T08:00:00Z",
};

/** Runs `f` with console.warn captured; returns what it returned and what was logged. */
function logged(f) {
  const lines = [];
  const warn = console.warn;
  console.warn = (...a) => lines.push(a.join(" "));
  try {
    return [f(), lines];
  } finally {
    console.warn = warn;
  }
}

test("well-formed stream and terminal messages pass", () => {
  assert.deepEqual(v.parseMessage("StreamUpdate", JSON.stringify({ event, running: 2 })), { event, running: 2 });
  assert.deepEqual(v.parseMessage("StreamChanged", '{"session":null,"running":0}'), { session: null, running: 0 });
  const session = "ses_01a235ef27b977c793f8512be763eb84";
  assert.deepEqual(v.parseMessage("StreamChanged", JSON.stringify({ session, running: 1 })), { session, running: 1 });
  const ended = { type: "ended", outcome: "lost", exit_code: null, reason: "device silent" };
  assert.deepEqual(v.parseMessage("ViewerEvent", JSON.stringify(ended)), ended);
  assert.deepEqual(v.parseMessage("ViewerEvent", '{"type":"resync"}'), { type: "resync" });
});

test("malformed messages are dropped and logged, never thrown on", () => {
  const bad = [
    ["StreamUpdate", "not json"],
    ["StreamUpdate", JSON.stringify({ event })],
    ["StreamUpdate", JSON.stringify({ event: { ...event, seq: "3" }, running: 1 })],
    ["StreamChanged", '{"session":7,"running":0}'],
    ["ViewerEvent", '{"type":"ended","outcome":"exploded","exit_code":null,"reason":null}'],
    ["ViewerEvent", '{"type":"teleport"}'],
    ["ViewerEvent", "null"],
  ];
  for (const [name, text] of bad) {
    const [got, lines] = logged(() => v.parseMessage(name, text));
    assert.equal(got, null, `${name} ${text}`);
    assert.equal(lines.length, 1, `${name} ${text}: ${lines}`);
    assert.match(lines[0], new RegExp(`dropped a ${name}`));
  }
});
