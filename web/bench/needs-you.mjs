// Benchmark: "Needs you" with the browser in the loop, on loopback. A run's hook
// (`drover hook claude`, started with a PermissionRequest event on its stdin as Claude
// Code starts it) holds a call; the time until the card is on the /inbox page a signed-in
// Chromium shows (over the live stream), and from clicking Approve there until the hook
// printed the decision and exited (the harness goes on). Beside them, a plain
// `GET /api/v1/health` round trip from the page, in the same run. Medians of N calls.
//
//   cd web && node bench/needs-you.mjs [N]     (uses target/debug/drover, or $DROVER_BIN)

import { spawn, execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DROVER, browser, signedIn, startDrover, until } from "../tests/harness.mjs";

const calls = Number(process.argv[2] ?? 20);
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const dir = mkdtempSync(join(tmpdir(), "drover-bench-needs-you-"));
const d = await startDrover(["--sandbox-write", dir]);
const b = await browser();
try {
  const repo = join(dir, "repo");
  execFileSync("git", ["init", "-q", "-b", "main", repo]);
  execFileSync("git", ["-C", repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "start"]);
  const script = join(dir, "agent.sh");
  const cred = join(dir, "credential");
  writeFileSync(script, `#!/bin/sh\necho "$DROVER_URL $DROVER_TOKEN $DROVER_SESSION" > '${cred}'\nexec sleep 600\n`);
  chmodSync(script, 0o755);
  await d.cli("repo", "add", "app", "--device", "e2e", "--path", repo);
  await d.cli("agent", "create", "bot", "--harness", "custom", "--", script, "{prompt}");
  await d.cli("task", "create", "--repo", "app", "--title", "held calls", "--agent", "bot");
  const [url, token, session] = await until("the run's credential", async () => {
    const parts = readFileSync(cred, "utf8").trim().split(/\s+/);
    return parts.length === 3 ? parts : null;
  }, 60_000);
  const { page } = await signedIn(b, d);
  await page.goto(`${d.url}/inbox`);
  await page.getByRole("heading", { name: "Needs you" }).waitFor();

  const listed = [];
  const decided = [];
  for (let i = 0; i < calls; i++) {
    const command = `make deploy-${i}`;
    const event = { hook_event_name: "PermissionRequest", session_id: "bench", cwd: "/", transcript_path: "/dev/null", tool_name: "Bash", tool_input: { command } };
    const card = page.locator("article.inbox-card", { has: page.locator('[data-testid="subject"]', { hasText: command }) });
    const t0 = performance.now();
    const hook = spawn(DROVER, ["hook", "claude"], { env: { ...process.env, DROVER_URL: url, DROVER_TOKEN: token, DROVER_SESSION: session } });
    let out = "";
    hook.stdout.on("data", (c) => (out += c));
    const exited = new Promise((ok) => hook.on("exit", ok));
    hook.stdin.end(JSON.stringify(event));
    await card.waitFor({ timeout: 30_000 });
    listed.push(performance.now() - t0);
    const t1 = performance.now();
    await card.getByRole("button", { name: "Approve", exact: true }).click();
    await exited;
    decided.push(performance.now() - t1);
    if (!out.includes('"behavior":"allow"')) throw new Error(`the hook printed ${JSON.stringify(out)}`);
    await card.waitFor({ state: "detached", timeout: 30_000 });
  }
  const health = [];
  for (let i = 0; i < Math.max(calls, 20); i++) {
    health.push(await page.evaluate(async () => {
      const t = performance.now();
      await fetch("/api/v1/health");
      return performance.now() - t;
    }));
  }
  console.log(
    `needs you in Chromium (${calls} held calls, medians): raised → card on /inbox ${median(listed).toFixed(1)} ms, ` +
      `Approve clicked → the harness goes on ${median(decided).toFixed(1)} ms (goal < 300 each); ` +
      `health round trip from the page ${median(health).toFixed(2)} ms`,
  );
} finally {
  await b.close();
  await d.stop();
  rmSync(dir, { recursive: true, force: true });
}
