// Test harness: a real `drover up` in a temporary home, the real CLI against it, and
// Debian's Chromium driven by Playwright.

import { spawn, execFile, execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const run = promisify(execFile);
// The debug binary `cargo build` made (in $CARGO_TARGET_DIR when set), or $DROVER_BIN.
export const DROVER =
  process.env.DROVER_BIN ?? join(process.env.CARGO_TARGET_DIR ? resolve(process.env.CARGO_TARGET_DIR) : resolve(import.meta.dirname, "../../target"), "debug/drover");
export const SHOTS = resolve(import.meta.dirname, "../test-results");
mkdirSync(SHOTS, { recursive: true });

/**
 * The database for a server in `home`: with DROVER_TEST_DATABASE naming a PostgreSQL
 * server (see scripts/postgres), a new database on it; otherwise SQLite in the home.
 */
function databaseEnv(home) {
  const server = process.env.DROVER_TEST_DATABASE;
  if (!server) return {};
  const name = "drover_e2e_" + home.replace(/[^A-Za-z0-9]/g, "").slice(-12).toLowerCase() + "_" + process.pid;
  return { DROVER_DATABASE: `${server.replace(/\/$/, "")}/${name}` };
}

/** Starts `drover up`; resolves once it printed its URL and sign-in link. */
export async function startDrover(extra = []) {
  const home = mkdtempSync(join(tmpdir(), "drover-e2e-"));
  const child = spawn(DROVER, ["up", "--listen", "127.0.0.1:0", "--name", "e2e", "--slots", "16", "--stop-grace", "1", ...extra], {
    env: { ...process.env, ...databaseEnv(home), DROVER_HOME: home, RUST_LOG: "warn" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout });
  let url, login;
  await new Promise((ok, fail) => {
    const t = setTimeout(() => fail(new Error("drover up did not print its URL in 30 s")), 30_000);
    child.on("exit", (code) => fail(new Error(`drover up exited (${code})`)));
    child.on("error", (e) => fail(new Error(`cannot run ${DROVER} (build it with \`cargo build\`, or set DROVER_BIN): ${e.message}`)));
    lines.on("line", (l) => {
      let m = l.match(/^Drover is running at (\S+)/);
      if (m) url = m[1];
      m = l.match(/open:\s+(\S+\/login#\S+)/);
      if (m) login = m[1];
      if (url && login) {
        clearTimeout(t);
        ok();
      }
    });
  });
  const d = {
    home,
    /** Its PostgreSQL database's URL, or null on SQLite (`drover.db` in the home). */
    database: databaseEnv(home).DROVER_DATABASE ?? null,
    url,
    login,
    async cli(...args) {
      const { stdout } = await run(DROVER, args, { env: { ...process.env, DROVER_HOME: home } });
      return stdout;
    },
    async json(...args) {
      return JSON.parse(await d.cli("--json", ...args));
    },
    async startSession(command, extra = []) {
      return (await d.cli("session", "start", "--device", "e2e", ...extra, "--", ...command)).trim();
    },
    async stop() {
      const live = await d.json("session", "list").catch(() => ({ sessions: [] }));
      for (const s of live.sessions ?? []) await d.cli("session", "stop", s.id).catch(() => {});
      child.kill("SIGTERM");
      await new Promise((ok) => (child.exitCode !== null ? ok() : child.on("exit", ok)));
      // Sessions outlive their daemon by design: end whatever is left of this home's.
      const sessions = join(home, "device", "sessions");
      for (const s of existsSync(sessions) ? readdirSync(sessions) : []) {
        for (const f of ["child.pid", "shim.pid"]) {
          try {
            const pid = Number(readFileSync(join(sessions, s, f), "utf8").trim());
            if (pid > 0) {
              try {
                process.kill(-pid, "SIGKILL");
              } catch {}
              process.kill(pid, "SIGKILL");
            }
          } catch {}
        }
      }
      rmSync(home, { recursive: true, force: true });
      // Its PostgreSQL database, if the suite runs on one.
      const db = databaseEnv(home).DROVER_DATABASE;
      if (db) {
        const at = db.lastIndexOf("/");
        await run("psql", ["-Xq", `${db.slice(0, at)}/postgres`, "-c", `DROP DATABASE IF EXISTS "${db.slice(at + 1)}" WITH (FORCE)`]).catch(() => {});
      }
    },
  };
  // The device connects a moment after the URL is printed.
  for (let i = 0; i < 100; i++) {
    if ((await d.cli("device", "list")).includes("connected")) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return d;
}

/** The CLI against a server already running in $DROVER_HOME (the benches' `drover up`). */
export function runningDrover() {
  return {
    async cli(...args) {
      const { stdout } = await run(DROVER, args, { env: process.env });
      return stdout;
    },
  };
}

/** Debian's Chromium, headless, with nothing reaching out to the network; `extra` are
 * more command-line switches. */
export async function browser(extra = []) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", ...extra],
  });
}

/** A signed-in page: a fresh one-time link (`drover ui`) sets the cookie and lands on
 * Sessions; `link` uses a given one (such as the one `drover up` printed). */
export async function signedIn(b, d, viewport = { width: 1280, height: 800 }, link = null) {
  const context = await b.newContext({ viewport });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  page.on("dialog", (dialog) => {
    errors.push(new Error(`unexpected dialog: ${dialog.message()}`));
    dialog.dismiss();
  });
  await page.goto(link ?? JSON.parse(await d.cli("--json", "ui")).url);
  await page.waitForURL(/\/sessions$/);
  return { context, page, errors };
}

/** The text on an xterm.js terminal's screen. xterm.js stops drawing a terminal that is
 * out of view, so it is scrolled into view first. */
export async function screenText(page, selector = '[data-testid="terminal"]') {
  await page.locator(selector).scrollIntoViewIfNeeded();
  return page.locator(`${selector} .xterm-rows`).innerText();
}

/** From the page's next load, notes in `window.__resyncAsks` when (epoch ms) its live
 * terminal asks for a re-sync, and in `window.__consumedBytes` how much output it has told
 * the server it is done with. The terminal's socket is in a worker (socket-worker.ts),
 * out of Playwright's sight, so what the page hands that worker to send is watched. */
export async function noteResyncAsks(page) {
  await page.addInitScript(() => {
    window.__resyncAsks = [];
    window.__consumedBytes = 0;
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (m, ...rest) {
      if (m?.op === "send" && typeof m.data === "string" && m.data.includes('"resync"')) window.__resyncAsks.push(Date.now());
      if (m?.op === "send" && typeof m.data === "string" && m.data.includes('"consumed"')) window.__consumedBytes += JSON.parse(m.data).bytes;
      return post.call(this, m, ...rest);
    };
  });
}

export async function until(what, f, timeout = 15_000) {
  const end = Date.now() + timeout;
  let last;
  while (Date.now() < end) {
    try {
      const v = await f();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
}

export async function shot(page, name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

/**
 * A repository `app` on the e2e device (a fresh clone under `dir` with one commit on
 * main) and a custom-harness agent `agent` running the shell script `script` (written
 * to `file` in `dir`) with the stage's prompt; returns the clone's path.
 */
export async function repoAndAgent(d, dir, agent, script, file = "agent.sh") {
  const repo = join(dir, "repo");
  execFileSync("git", ["init", "-q", "-b", "main", repo]);
  execFileSync("git", ["-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start"]);
  const path = join(dir, file);
  writeFileSync(path, script);
  chmodSync(path, 0o755);
  await d.cli("repo", "add", "app", "--device", "e2e", "--path", repo);
  await d.cli("agent", "create", agent, "--harness", "custom", "--", path, "{prompt}");
  return repo;
}
