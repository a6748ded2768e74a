// A session's page (issue 20): the live page counts you among those attached, the Send
// confirmation reads as a time, the key row stays pinned on a phone wherever the page is
// scrolled; a finished task run shows its program rather than its whole prompt, no
// "Active" sandbox beside an ended run, its recording's last frame before Play, and a
// final screen that scrolls inside its own box on a phone.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browser, repoAndAgent, screenText, shot, signedIn, startDrover, until } from "./harness.mjs";

const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };
let d, b, dir;
before(async () => {
  d = await startDrover();
  b = await browser();
  dir = mkdtempSync(join(tmpdir(), "drover-e2e-repo-"));
  // A harness that prints a wide line and fails, every time it is staffed.
  await repoAndAgent(d, dir, "failer", `#!/bin/sh\necho "about to fail $(printf '%0150d' 0)"\nsleep 1\nexit 3\n`, "failing-agent.sh");
});
after(async () => {
  await b?.close();
  await d?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const overflow = (page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

test("the live page counts you as attached and confirms Send with a time", async () => {
  const { page, errors } = await signedIn(b, d, DESKTOP);
  const id = await d.startSession(["bash", "--norc", "--noprofile"], ["--title", "attached"]);
  await page.goto(`${d.url}/sessions/${id}`);
  await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected");
  await until("counted", async () => (await page.getByTestId("attached").innerText()) === "1 attached (you)");
  await page.getByLabel("Send input (audited)").fill("echo hi");
  await page.getByRole("button", { name: "Send input (audited)" }).click();
  const status = page.getByTestId("send-status");
  await status.waitFor();
  const text = await status.innerText();
  assert.match(text, /^Sent at \d{1,2}:\d\d:\d\d( [AP]M)? and recorded in the activity feed\.$/);
  assert.doesNotMatch(text, /evt_/, "no raw event id in the text");
  assert.match(await status.getAttribute("title"), /evt_/, "the id is in the tooltip");
  await d.cli("session", "stop", id);
  assert.deepEqual(errors, []);
});

test("on a phone the key row stays pinned above the bottom while on the live page", async () => {
  const { page, errors } = await signedIn(b, d, PHONE);
  const id = await d.startSession(["bash", "--norc", "--noprofile"], ["--title", "pinned keys"]);
  for (let i = 0; i < 6; i++) await d.cli("session", "input", id, `echo line ${i}`);
  await page.goto(`${d.url}/sessions/${id}`);
  await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected");
  await until("activity listed", async () => (await page.locator("section.did li").count()) >= 6);
  const where = () =>
    page.evaluate(() => {
      const keys = document.querySelector('[role="toolbar"]').getBoundingClientRect();
      const send = document.querySelector(".send-box button").getBoundingClientRect();
      return { keysTop: keys.top, keysBottom: keys.bottom, sendBottom: send.bottom, viewport: innerHeight };
    });
  for (const y of ["top", "middle", "bottom"]) {
    await page.evaluate((y) => {
      const max = document.documentElement.scrollHeight - innerHeight;
      window.scrollTo(0, y === "top" ? 0 : y === "middle" ? max / 2 : max);
    }, y);
    await page.waitForTimeout(100);
    const w = await where();
    assert.ok(Math.abs(w.keysBottom - w.viewport) <= 1, `key row at the bottom when scrolled to the ${y}: ${JSON.stringify(w)}`);
    if (y === "bottom") assert.ok(w.sendBottom <= w.keysTop, `the Send button clear of the key row: ${JSON.stringify(w)}`);
  }
  assert.equal(await overflow(page), 0);
  await shot(page, "live-keys-390");
  await d.cli("session", "stop", id);
  await until("ended", async () => (await page.getByTestId("pill").innerText()).startsWith("session "), 20_000);
  assert.equal(await page.locator('[role="toolbar"]').count(), 0, "no key row once ended");
  assert.deepEqual(errors, []);
});

test("a failed task run's page: its program, an honest sandbox badge, a poster, a contained final screen", async () => {
  const task = (await d.cli("task", "create", "--repo", "app", "--title", "Fail", "--type", "bug", "--stages", "code", "--assign", "code=failer", "--body", "First paragraph of a long prompt.\n\nSecond paragraph, with more.\n\nThird.")).trim();
  // Staffed again after each failure until it is flagged for a human.
  await until("flagged", async () => (await d.json("task", "show", task)).task.flagged, 60_000);
  const runs = (await d.json("task", "show", task)).sessions;
  const run = runs[runs.length - 1].id;
  assert.equal((await d.json("session", "show", run)).outcome, "failed");

  for (const viewport of [DESKTOP, PHONE]) {
    const { page, errors } = await signedIn(b, d, viewport);
    await page.goto(`${d.url}/sessions/${run}`);
    await page.getByTestId("summary").waitFor();
    assert.equal(await page.getByTestId("pill").innerText(), "session failed");
    // The program, not the whole prompt; the full line behind a disclosure.
    assert.equal(await page.getByTestId("program").innerText(), "failing-agent.sh …");
    const meta = await page.locator("p.meta").first().innerText();
    assert.doesNotMatch(meta, /paragraph/);
    const full = page.getByTestId("command");
    assert.equal(await full.evaluate((e) => e.open), false);
    assert.equal(await full.locator("pre").isVisible(), false);
    await full.locator("summary").click();
    assert.match(await full.locator("pre").innerText(), /Second paragraph/);
    // No run works in the sandbox: it is not called Active.
    const badge = page.locator("p.meta .badge.state");
    await until("the sandbox's state", async () => (await badge.innerText()) === "sandbox idle");
    assert.match(await badge.getAttribute("title"), /no run is working in it now/);

    // The recording shows its last frame before Play.
    await until("the poster", async () => (await screenText(page, '[data-testid="player"]')).includes("about to fail"), 20_000);
    // The wide final screen scrolls inside its own box; the page does not.
    await until("final screen", async () => (await screenText(page, '[data-testid="final-screen"]')).includes("about to fail"), 20_000);
    assert.equal(await overflow(page), 0, `the finished page fits ${viewport.width} px`);
    for (const id of ["final-screen", "player"]) {
      const box = await page.getByTestId(id).boundingBox();
      assert.ok(box.x >= 0 && box.x + box.width <= viewport.width, `${id} inside the window: ${JSON.stringify(box)}`);
    }
    if (viewport === PHONE) {
      const scrolled = await page.getByTestId("final-screen").evaluate((e) => {
        e.scrollLeft = 120;
        return { wider: e.scrollWidth > e.clientWidth, left: e.scrollLeft };
      });
      assert.ok(scrolled.wider && scrolled.left > 0, `the final screen scrolls in its box: ${JSON.stringify(scrolled)}`);
      assert.equal(await overflow(page), 0);
    }
    await shot(page, `failed-run-${viewport.width}`);

    // The All list does not call it Active either.
    await page.goto(`${d.url}/sessions?filter=all&q=Fail`);
    const row = page.locator(`tr[data-session="${run}"]`);
    await row.waitFor();
    assert.match(await row.locator('td[data-label="State"]').innerText(), /Idle\s+last run failed/);
    assert.deepEqual(errors, []);
    await page.context().close();
  }
});
