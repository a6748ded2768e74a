// A stand-in for Claude Code in the browser tests: an executable named `claude`, put first
// on the PATH of `drover up` (which passes its PATH on to runs, after its own bin folder),
// that reads the `--settings` Drover starts it with and runs the hooks configured there
// exactly as the hook contract says: the event as JSON on the stdin of `sh -c COMMAND`,
// a `PermissionRequest` hook's JSON on stdout deciding. Each test writes what it does
// after the shared prelude (which defines `args`, `settings` and `run_hook`).

import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browser, startDrover } from "./harness.mjs";

/** The stand-in's first lines: its settings, and running the hooks of one event. */
export const PRELUDE = `#!/usr/bin/env python3
import json, os, subprocess, sys, time
args = sys.argv[1:]
settings = json.loads(args[args.index("--settings") + 1])

def run_hook(name, event):
    outs = []
    for group in settings["hooks"].get(name, []):
        for h in group["hooks"]:
            ev = dict(event, hook_event_name=name, session_id="s", cwd=os.getcwd(), transcript_path="/dev/null")
            p = subprocess.run(["sh", "-c", h["command"]], input=json.dumps(ev), capture_output=True, text=True, timeout=h.get("timeout", 600))
            outs.append(p.stdout.strip())
    return outs[0] if outs else ""
`;

/**
 * A temporary folder with the stand-in (`PRELUDE` then `body`) as `claude` first on the
 * PATH, a `drover up` (with `extra` options), a browser, a repository `app` and the agent
 * `claude-1` (harness claude): `{ d, b, dir }`.
 */
export async function withClaude(name, body, extra = []) {
  const dir = mkdtempSync(join(tmpdir(), `drover-e2e-${name}-`));
  const bin = join(dir, "bin");
  mkdirSync(bin);
  writeFileSync(join(bin, "claude"), PRELUDE + body);
  chmodSync(join(bin, "claude"), 0o755);
  process.env.PATH = `${bin}:${process.env.PATH}`;
  const d = await startDrover(extra);
  const b = await browser();
  const repo = join(dir, "repo");
  execFileSync("git", ["init", "-q", "-b", "main", repo]);
  execFileSync("git", ["-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start"]);
  await d.cli("repo", "add", "app", "--device", "e2e", "--path", repo);
  await d.cli("agent", "create", "claude-1", "--harness", "claude");
  return { d, b, dir };
}

/** Closes what `withClaude` opened (any part may be missing if it failed half way). */
export async function closeClaude({ d, b, dir } = {}) {
  await b?.close();
  await d?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}

/** How much wider than the window the page is (0: it fits). */
export const overflow = (page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

/** What `run` printed, as plain text. */
export const tail = (d, run) => d.cli("session", "tail", run, "--lines", "100000");
