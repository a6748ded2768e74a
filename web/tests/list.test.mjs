// The sandbox list's rough edges (issue 20): an untitled session is named after its
// program; a live update never pushes a row out of order; rows keep their column widths
// and heights as more load, at 1440x900 and 390x844; "task $X" is a second, smaller
// line, and every row of one task shows the same task total; money has one format; an
// empty search says so and offers to clear it.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, appendFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browser, repoAndAgent, shot, signedIn, startDrover, until } from "./harness.mjs";

const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };
const claude = mkdtempSync(join(tmpdir(), "drover-claude-"));
let d, b, dir;
before(async () => {
  process.env.CLAUDE_CONFIG_DIR = claude;
  d = await startDrover();
  b = await browser();
  dir = mkdtempSync(join(tmpdir(), "drover-e2e-repo-"));
  await repoAndAgent(d, dir, "bot", "#!/bin/sh\necho working\nsleep 600\n");
});
after(async () => {
  await b?.close();
  await d?.stop();
  rmSync(dir, { recursive: true, force: true });
  rmSync(claude, { recursive: true, force: true });
});

/** The sandbox list as the server orders it (newest first). */
const serverOrder = async (page) =>
  page.evaluate(async () => (await (await fetch("/api/v1/sandboxes?filter=all&limit=200")).json()).sandboxes.map((s) => s.id));
const domOrder = (page) => page.locator("table.sandboxes tbody tr").evaluateAll((rows) => rows.map((r) => r.dataset.sandbox));
const overflow = (page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

/** Widths of the header cells and heights of the rows. */
const geometry = (page) =>
  page.evaluate(() => ({
    columns: [...document.querySelectorAll("table.sandboxes thead th")].map((th) => Math.round(th.getBoundingClientRect().width)),
    heights: [...document.querySelectorAll("table.sandboxes tbody tr")].map((tr) => Math.round(tr.getBoundingClientRect().height)),
  }));

/** Cells whose badges sit on more than one line. */
const wrappedBadges = (page) =>
  page.evaluate(() =>
    [...document.querySelectorAll('table.sandboxes td[data-label="Type"], table.sandboxes td[data-label="State"]')]
      .filter((td) => new Set([...td.querySelectorAll(".badge")].map((e) => Math.round(e.getBoundingClientRect().top))).size > 1)
      .map((td) => td.innerText),
  );

/** A Claude Code transcript line for one response of `run`, stamped now (once it has
 *  started: what came before is not its usage). */
async function transcript(run, n, output) {
  const { cwd } = await until("the run started", async () => {
    const s = await d.json("session", "show", run);
    return s.started_at && s;
  });
  await new Promise((r) => setTimeout(r, 50));
  const projects = join(claude, "projects", cwd.replace(/[^A-Za-z0-9]/g, "-"));
  mkdirSync(projects, { recursive: true });
  const usage = { input_tokens: 100, output_tokens: output, cache_creation_input_tokens: 1000, cache_read_input_tokens: 9000 };
  const line = { type: "assistant", requestId: `req_${n}`, timestamp: new Date().toISOString(), message: { id: `msg_${n}`, model: "claude-sonnet-4-5-20250929", usage } };
  appendFileSync(join(projects, `t${n}.jsonl`), JSON.stringify(line) + "\n");
}

test("an untitled session is named after its program, linked, and found by search", async () => {
  const { page, errors } = await signedIn(b, d, DESKTOP);
  const id = await d.startSession(["sleep", "600"]);
  const row = page.locator(`tr[data-session="${id}"]`);
  await row.waitFor();
  const cell = row.locator('td[data-label="Working on"]');
  assert.equal((await cell.innerText()).trim(), "sleep");
  assert.equal(await cell.getByRole("link", { name: "sleep" }).getAttribute("href"), `/sessions/${id}`);
  await page.getByLabel("Search sessions").fill("sleep");
  await until("found by search", async () => /q=sleep/.test(page.url()) && (await page.locator("tbody tr[data-session]").count()) === 1);
  assert.equal(await page.locator(`tr[data-session="${id}"]`).count(), 1);
  assert.deepEqual(errors, []);
});

test("an empty search says nothing matched and offers to clear it", async () => {
  const { page, errors } = await signedIn(b, d, DESKTOP);
  await page.getByLabel("Search sessions").fill("no-such-sandbox");
  const empty = page.getByTestId("empty");
  await until("the empty result", async () => /no-such-sandbox/.test(await empty.innerText()));
  const text = await empty.innerText();
  assert.match(text, /Nothing running now matches “no-such-sandbox”/);
  assert.doesNotMatch(text, /drover session start/, "no hint to start a session for a search that matched nothing");
  await empty.getByRole("button", { name: "Clear the search" }).click();
  await until("the search cleared", async () => !/q=/.test(page.url()) && (await page.getByLabel("Search sessions").inputValue()) === "");
  await page.locator("tbody tr[data-session]").first().waitFor();
  assert.deepEqual(errors, []);
});

test("rows stay in order, and keep their widths and heights as more load", async () => {
  // Oldest first: a live run with a long title (so it would widen the list when it
  // loads), 50 ended runs, then a live chore task: 52 rows with the first test's, more
  // than the first batch of 50.
  const old = await d.startSession(["sleep", "600"], ["--title", "the oldest live run, with a title long enough to want a much wider Working on column"]);
  for (let i = 0; i < 50; i++) await d.startSession(["true"], ["--title", `ended ${i}`]);
  const task = (await d.cli("task", "create", "--repo", "app", "--title", "Sweep", "--type", "chore", "--stages", "code", "--assign", "code=bot")).trim();
  await until("the task's run", async () => (await d.json("task", "show", task)).task.live_session);
  await until("every run ended", async () => (await d.json("session", "list")).length === 3, 30_000);

  for (const viewport of [DESKTOP, PHONE]) {
    const { page, errors } = await signedIn(b, d, viewport);
    await page.goto(`${d.url}/sessions?filter=all`);
    await until("the first batch", async () => (await page.locator("tbody tr").count()) === 50);
    const first = await geometry(page);
    assert.deepEqual(await wrappedBadges(page), [], `badges on one line at ${viewport.width}`);
    if (viewport === DESKTOP) assert.equal(new Set(first.heights).size, 1, `rows of one height: ${first.heights}`);
    assert.equal(await overflow(page), 0);
    await shot(page, `list-rows-${viewport.width}`);

    // A live row not loaded yet changes: it stays out of the list until its batch.
    const refreshed = page.waitForResponse((r) => r.url().includes(`q=${old}`));
    await d.cli("session", "input", old, "hello");
    await refreshed;
    await page.waitForTimeout(300);
    assert.equal(await page.locator(`tr[data-session="${old}"]`).count(), 0, "not pushed in ahead of its batch");
    assert.deepEqual(await domOrder(page), (await serverOrder(page)).slice(0, 50));

    // Scrolling Load more into view may load the batch first (the list loads more as
    // its end comes into view), taking the link away mid-click: either way, every row.
    await page.getByRole("link", { name: "Load more" }).click({ timeout: 5_000 }).catch(() => {});
    await until("every row", async () => (await page.locator("tbody tr").count()) === 53);
    assert.deepEqual(await domOrder(page), await serverOrder(page), "the list in the server's order");
    const all = await geometry(page);
    assert.deepEqual(all.columns, first.columns, "column widths kept as rows load");
    if (viewport === DESKTOP) assert.equal(new Set(all.heights).size, 1, `rows of one height: ${all.heights}`);
    assert.deepEqual(await wrappedBadges(page), []);
    assert.equal(await overflow(page), 0);

    // Loaded now, it changes again: it keeps its place.
    const again = page.waitForResponse((r) => r.url().includes(`q=${old}`));
    await d.cli("session", "input", old, "again");
    await again;
    await page.waitForTimeout(300);
    assert.deepEqual(await domOrder(page), await serverOrder(page));
    assert.deepEqual(errors, []);
    await page.context().close();
  }
  await d.cli("session", "stop", old);
  await d.cli("task", "cancel", task);
});

test("every row of a task shows one task total, on a second line, in one money format", async () => {
  const task = (await d.cli("task", "create", "--repo", "app", "--title", "Two sandboxes", "--type", "bug", "--stages", "code", "--assign", "code=bot")).trim();
  const run1 = await until("the first run", async () => (await d.json("task", "show", task)).task.live_session);
  await transcript(run1, 1, 80000); // $1.20675
  await until("the first run's cost", async () => (await d.json("session", "show", run1)).spend?.total_nano > 0, 20_000);
  // Mark done closes its sandbox; Launch session starts the next run in a fresh one.
  await d.cli("task", "finish", task);
  await d.cli("task", "mark-done", task);
  await until("the first run ended", async () => (await d.json("session", "show", run1)).outcome !== "running", 20_000);
  await d.cli("task", "launch", task);
  const run2 = await until("the second run", async () => {
    const s = (await d.json("task", "show", task)).task.live_session;
    return s !== run1 && s;
  });

  for (const viewport of [DESKTOP, PHONE]) {
    const { page, errors } = await signedIn(b, d, viewport);
    await page.goto(`${d.url}/sessions?filter=all&q=Two%20sandboxes`);
    const row1 = page.locator(`tr[data-session="${run1}"]`);
    const row2 = page.locator(`tr[data-session="${run2}"]`);
    await row1.waitFor();
    await row2.waitFor();
    if (viewport === DESKTOP) {
      // Only the second run's row hears of its new spend.
      await transcript(run2, 2, 28000); // $0.42675
    }
    await until("the second run's cost", async () => /\$0\.4\d\n/.test(await row2.locator('td[data-label="Cost"]').innerText()), 20_000);
    const total = async (row) => (await row.getByTestId("task-cost").innerText()).trim();
    await until("both rows show the new task total", async () => (await total(row2)) === "task $1.63" && (await total(row1)) === "task $1.63");

    // "task $X" is a second, smaller line under the row's own cost.
    for (const row of [row1, row2]) {
      const [own, sub] = await row.locator('td[data-label="Cost"] .cost > span').evaluateAll((els) =>
        els.map((e) => ({ ...JSON.parse(JSON.stringify(e.getBoundingClientRect())), size: parseFloat(getComputedStyle(e).fontSize) })),
      );
      assert.ok(sub.top >= own.bottom - 1, `task total under the cost: ${JSON.stringify([own, sub])}`);
      assert.ok(sub.size < own.size, "task total smaller");
    }
    assert.equal((await row1.locator('td[data-label="Cost"] .cost > span').first().innerText()).trim(), "$1.21");
    assert.match(await row1.locator('td[data-label="Cost"] .cost > span').first().getAttribute("title"), /exactly \$1\.20675/);

    // The run's own page uses the same format.
    await page.goto(`${d.url}/sessions/${run1}`);
    await page.getByTestId("summary").waitFor();
    const cost = await page.getByTestId("cost").innerText();
    assert.match(cost, /^\$1\.21 \(generation \$\d+\.\d\d \+ cache reads (\$\d+\.\d\d|<\$0\.01)\)/);
    assert.doesNotMatch(cost, /\$\d+\.\d{3}/, "never more than two decimals");
    await shot(page, `task-totals-${viewport.width}`);
    assert.deepEqual(errors, []);
    await page.context().close();
  }
  await d.cli("task", "cancel", task);
});

test("on a phone the nav is one row and the search placeholder is read whole", async () => {
  for (const viewport of [PHONE, DESKTOP]) {
    const { page, errors } = await signedIn(b, d, viewport);
    const items = page.locator(".nav-item");
    await items.first().waitFor();
    if (viewport === PHONE) {
      const tops = await items.evaluateAll((els) => els.map((e) => Math.round(e.getBoundingClientRect().top)));
      assert.equal(new Set(tops).size, 1, `nav links on one row: ${tops}`);
      const bar = await page.locator("nav.sidebar").boundingBox();
      assert.ok(bar.height < 60, `the top bar is one row: ${bar.height}px`);
      // Every link is reachable by scrolling the bar sideways; the page itself does not.
      await page.getByRole("link", { name: "Members" }).scrollIntoViewIfNeeded();
      const members = await page.getByRole("link", { name: "Members" }).boundingBox();
      assert.ok(members.x >= 0 && members.x + members.width <= viewport.width, `Members reachable: ${JSON.stringify(members)}`);
    }
    assert.equal(await overflow(page), 0);
    const fits = await page.getByLabel("Search sessions").evaluate((input) => {
      const s = getComputedStyle(input);
      const ctx = document.createElement("canvas").getContext("2d");
      ctx.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
      const room = input.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
      return { text: ctx.measureText(input.placeholder).width, room };
    });
    assert.ok(fits.text <= fits.room, `placeholder fits at ${viewport.width}: ${JSON.stringify(fits)}`);
    await shot(page, `nav-${viewport.width}`);
    assert.deepEqual(errors, []);
    await page.context().close();
  }
});
