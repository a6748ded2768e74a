// A session goes quiet (seed 001 "When a session goes quiet"): the local device is told
// to heartbeat only hourly and the silent window is 2 s, so a running session is
// flagged Device silent — shown in Sessions needing attention with Last contact and the
// header's "N stale" — then marked lost at the next check; its page says Lost at, shows
// no Duration, and a banner gives the reason.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { browser, shot, signedIn, startDrover, until } from "./harness.mjs";

let d, b;
before(async () => {
  d = await startDrover(["--heartbeat-secs", "3600", "--device-silent-secs", "2", "--monitor-secs", "3"]);
  b = await browser();
});
after(async () => {
  await b?.close();
  await d?.stop();
});

test("a quiet session is flagged, needs attention, then is lost with its reason", async () => {
  const { page, errors } = await signedIn(b, d);
  const id = (await d.cli("session", "start", "--device", "e2e", "--title", "quiet <i>one</i>", "--", "sh", "-c", "echo hi; sleep 300")).trim();
  await page.getByRole("link", { name: "Sessions" }).click();
  const row = page.locator(`section.attention tr[data-session="${id}"]`);
  await row.waitFor({ timeout: 20_000 });
  const text = await row.innerText();
  assert.match(text, /quiet <i>one<\/i>/);
  assert.match(text, /Device silent/);
  assert.doesNotMatch(text, /—\s*$/, "Last contact is filled in on a stale row");
  // Its exact local time on hover.
  const contact = await row.locator('td[data-label="Last contact"]').getAttribute("title");
  assert.match(contact ?? "", /\d{4}.*\d{1,2}:\d\d:\d\d/, "the exact time as a tooltip");
  assert.match(await row.locator(".badge.warning").getAttribute("title"), /hasn't reported in/);
  assert.match(await page.locator("header").first().innerText(), /1 stale/);
  await shot(page, "sessions-attention");

  // Still flagged at the next check: lost; the section empties.
  await until("the attention section gone", async () => (await page.locator("section.attention").count()) === 0, 20_000);
  await page.goto(`${d.url}/devices/e2e`);
  assert.match((await page.getByTestId("last-contact").getAttribute("title")) ?? "", /\d{4}.*\d{1,2}:\d\d:\d\d/, "the device's last contact, exactly");
  await page.goto(`${d.url}/sessions/${id}`);
  const summary = page.getByTestId("summary");
  await summary.waitFor();
  const s = await summary.innerText();
  assert.match(s, /Lost at/);
  assert.doesNotMatch(s, /Duration/);
  assert.match(await page.locator(".banner.bad").innerText(), /Reason: the device dropped off and missed its check-ins/);
  await shot(page, "session-lost");
  assert.deepEqual(errors, []);
});
