// A search of one or two characters (which no index serves) looks through part of the
// list per request and goes on from where it stopped: the page asks again until it has a
// batch or the list ends, so a match older than the first part is found, and "nothing
// matches" is said only once the whole list was looked through. The CLI does the same.
// Runs on SQLite and PostgreSQL (rows are written straight into the server's database).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { browser, signedIn, startDrover, until } from "./harness.mjs";

const run = promisify(execFile);

/** Sandboxes written newer than the match: more than a short search looks through in
 *  one request (the server's SHORT_SEARCH_ROWS). */
const NEWER = 25_000;

let d, b, needle;
before(async () => {
  d = await startDrover();
  b = await browser();
  needle = await d.startSession(["sleep", "600"], ["--title", "the needle qz"]);
  await d.cli("session", "stop", needle);
  await until("the needle ended", async () => (await d.json("session", "show", needle)).outcome !== "running");
  await sql(await seedNewer());
});
after(async () => {
  await b?.close();
  await d?.stop();
});

/** Runs `script` on the server's database: its SQLite file, or its PostgreSQL database. */
async function sql(script) {
  const [cmd, args] = d.database
    ? ["psql", ["-XqAt", "-v", "ON_ERROR_STOP=1", d.database]] : ["sqlite3", ["-bail", join(d.home, "drover.db")]];
  const child = run(cmd, args, { maxBuffer: 1 << 20 });
  child.child.stdin.end(script);
  return (await child).stdout;
}

/** An INSERT of NEWER ended sandboxes on the device, created after everything else. */
async function seedNewer() {
  const [ws, dev] = (await sql("SELECT workspace_id || '|' || id FROM devices WHERE name = 'e2e';")).trim().split("|");
  const t0 = Date.now() + 60_000;
  const rows = [];
  for (let i = 0; i < NEWER; i++) {
    const id = "sbx_" + (0x10000000 + i).toString(16).padStart(32, "0");
    const at = new Date(t0 + i * 1000).toISOString().replace("Z", "000Z");
    rows.push(`('${id}', '${ws}', '${dev}', 'remote', 'filler ${i}', '/', 'stopped', '${at}', '${at}')`);
  }
  return `INSERT INTO sandboxes (id, workspace_id, device_id, kind, title, cwd, state, created_at, updated_at) VALUES ${rows.join(",\n")};\n`;
}

/** The `q` of every list request the page makes. */
function listRequests(page) {
  const seen = [];
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (u.pathname === "/api/v1/sandboxes") seen.push(u.searchParams.get("q"));
  });
  return seen;
}

test("a two-letter search finds a match older than one request looks through", async () => {
  const { page, errors } = await signedIn(b, d);
  const asked = listRequests(page);
  await page.goto(new URL("/sessions?filter=all&q=qz", d.url).toString());
  await until("the needle found", async () => (await page.locator(`tr[data-session="${needle}"]`).count()) === 1, 30_000);
  assert.equal(await page.locator("tbody tr[data-session]").count(), 1, "only the match");
  assert.ok(asked.filter((q) => q === "qz").length >= 2, `the page went on past the first part: ${asked}`);
  assert.equal(await page.getByTestId("empty").count(), 0);
  assert.deepEqual(errors, []);
});

/** How many list requests for `q` the page has had answered so far (or failed). */
function listAnswers(page, q) {
  let n = 0;
  const count = (r) => {
    const u = new URL(r.url());
    if (u.pathname === "/api/v1/sandboxes" && u.searchParams.get("q") === q) n++;
  };
  page.on("requestfinished", count);
  page.on("requestfailed", count);
  return () => n;
}

/** Has the page note, in `window.shownThenGone`, whether the row of `id` was ever taken
 *  out of the list after it had been shown. */
async function watchRow(page, id) {
  await page.addInitScript((id) => {
    let shown = false;
    window.shownThenGone = false;
    new MutationObserver(() => {
      const there = document.querySelector(`tr[data-session="${id}"]`) !== null;
      if (shown && !there) window.shownThenGone = true;
      shown ||= there;
    }).observe(document, { childList: true, subtree: true });
  }, id);
}

test("a resync while a short search's match is shown keeps the match in view", async () => {
  const { page, errors } = await signedIn(b, d);
  const asked = listRequests(page);
  const answered = listAnswers(page, "qz");
  await watchRow(page, needle);
  // The live stream opens only once the match is shown; its opening asks for a resync,
  // which looks through the list again from its start.
  let release;
  const held = new Promise((r) => (release = r));
  await page.route("**/api/v1/stream", async (route) => {
    await held;
    await route.continue();
  });
  await page.goto(new URL("/sessions?filter=all&q=qz", d.url).toString());
  await until("the needle found", async () => (await page.locator(`tr[data-session="${needle}"]`).count()) === 1, 30_000);
  const searched = () => asked.filter((q) => q === "qz").length;
  const before = searched();
  release();
  await until("the list looked through again", async () => searched() >= before + 2, 30_000);
  // Done once every request of the search was answered and none followed for a while.
  let seen = -1;
  await until("the search done", async () => {
    const quiet = seen === searched() && answered() === seen;
    seen = searched();
    await new Promise((r) => setTimeout(r, 300));
    return quiet;
  }, 30_000);
  assert.equal(await page.evaluate(() => window.shownThenGone), false, "the match blinked out during the resync");
  assert.equal(await page.locator("tbody tr[data-session]").count(), 1, "only the match");
  assert.deepEqual(errors, []);
});

/** Has the page note, in `window.emptyAfter`, how many list answers it had received when
 *  an empty-list message first appeared (null while none has). */
async function watchEmpty(page) {
  await page.addInitScript(() => {
    let answers = 0;
    window.emptyAfter = null;
    const fetched = window.fetch;
    window.fetch = async (...args) => {
      const r = await fetched(...args);
      if (String(args[0]).startsWith("/api/v1/sandboxes?")) answers++;
      return r;
    };
    new MutationObserver(() => {
      if (window.emptyAfter === null && document.querySelector('[data-testid="empty"]')) window.emptyAfter = answers;
    }).observe(document, { childList: true, subtree: true });
  });
}

test("a two-letter search that matches nothing says so once the list is looked through", async () => {
  const { page, errors } = await signedIn(b, d);
  const asked = listRequests(page);
  await watchEmpty(page);
  await page.goto(new URL("/sessions?filter=all&q=zx", d.url).toString());
  const empty = page.getByTestId("empty");
  await until("the empty result", async () => (await empty.count()) === 1 && /zx/.test(await empty.innerText()), 30_000);
  assert.ok(asked.filter((q) => q === "zx").length >= 2, `every part was asked for: ${asked}`);
  // Never said before then, not even on the render before the first request.
  assert.ok((await page.evaluate(() => window.emptyAfter)) >= 2, "nothing matches was said before the list was looked through");
  assert.equal(await page.locator("tbody tr").count(), 0);
  assert.deepEqual(errors, []);
});

test("the CLI's list goes on the same way", async () => {
  const found = await d.json("sandbox", "list", "--filter", "all", "--search", "QZ");
  assert.deepEqual(
    found.map((s) => s.last_run?.id),
    [needle],
  );
  assert.deepEqual(await d.json("sandbox", "list", "--filter", "all", "--search", "zx"), []);
});
