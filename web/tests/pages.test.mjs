// An agent's and a repository's pages in the browser, at 1440x900 and 390x844: from a
// session row's agent link to the agent's page, its live run listed first (above a newer
// finished one), the run expanded and text sent through its Send box reaching the
// program; then the repository's page listing the tasks, with nothing wider than a phone.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DROVER, browser, repoAndAgent, shot, signedIn, startDrover, until } from "./harness.mjs";

const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };
const overflow = (page) => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

let d, b, dir, live, done, liveTask, doneTask, peopleTask;

/** The task's runs, once `pred` holds for them. */
async function runsOf(id, what, pred) {
  return until(what, async () => {
    const t = await d.json("task", "show", id);
    return pred(t) ? t.sessions : null;
  }, 60_000);
}

before(async () => {
  d = await startDrover();
  b = await browser();
  dir = mkdtempSync(join(tmpdir(), "drover-e2e-pages-"));
  // The stand-in agent hands `plan` off at once; on any other stage it answers each line
  // it is sent, so what the Send box sends shows in its output.
  await repoAndAgent(d, dir, "bot", `#!/bin/sh\nif [ "$DROVER_STAGE" = plan ]; then '${DROVER}' task advance --note planned; exec sleep 600; fi\necho ready\nwhile read line; do echo "got: $line"; done\n`);
  // A live run, then a newer one that finishes, then a task only people work.
  liveTask = (await d.cli("task", "create", "--repo", "app", "--title", "Live <i>work</i>", "--stages", "code", "--assign", "code=bot")).trim();
  live = (await runsOf(liveTask, "the live run", (t) => t.sessions.some((s) => s.outcome === "running"))).find((s) => s.outcome === "running").id;
  doneTask = (await d.cli("task", "create", "--repo", "app", "--title", "Planned already", "--stages", "plan", "--assign", "plan=bot")).trim();
  done = (await runsOf(doneTask, "the finished run", (t) => t.task.status === "done" && t.sessions.every((s) => !["starting", "running"].includes(s.outcome))))[0].id;
  peopleTask = (await d.cli("task", "create", "--repo", "app", "--title", "For people", "--stages", "review")).trim();
});
after(async () => {
  await b?.close();
  await d?.stop();
  rmSync(dir, { recursive: true, force: true });
});

for (const [label, viewport] of [["1440", DESKTOP], ["390", PHONE]]) {
  test(`agent and repo pages at ${label}: live run first, Send box, tasks`, async () => {
    const { page, errors } = await signedIn(b, d, viewport);
    // From the Sessions list, the live run's row links its agent.
    const row = page.locator(`tr[data-session="${live}"]`);
    await row.waitFor({ timeout: 15_000 });
    await row.getByRole("link", { name: "bot", exact: true }).click();
    await page.waitForURL(/\/agents\/bot$/);
    await page.getByRole("heading", { name: "Sessions" }).waitFor();
    assert.match(await page.getByTestId("agent-facts").innerText(), /harness custom · operator /);

    // The live run first, although the finished one is newer.
    const rows = page.locator("table.runs tbody tr[data-session]");
    await until("both runs", async () => (await rows.count()) === 2);
    assert.equal(await rows.nth(0).getAttribute("data-session"), live);
    assert.equal(await rows.nth(1).getAttribute("data-session"), done);
    assert.match(await rows.nth(0).innerText(), /Running/i);
    assert.match(await rows.nth(1).innerText(), /Completed/i);
    assert.equal(await rows.nth(1).getByRole("button", { name: /Expand/ }).count(), 0, "only live runs expand");
    // Its tasks, with whose turn it is; not the one people work.
    const tasks = page.locator("table.page-tasks tbody tr");
    await until("the agent's tasks", async () => (await tasks.count()) === 2);
    assert.equal(await page.locator(`tr[data-task="${peopleTask}"]`).count(), 0);
    assert.match(await page.locator(`tr[data-task="${liveTask}"]`).innerText(), /Live <i>work<\/i>/, "a title is text");
    assert.match(await page.locator(`tr[data-task="${doneTask}"]`).innerText(), /Done/);
    assert.match(await page.getByTestId("page-spend").innerText(), /total spend/);
    assert.equal(await overflow(page), 0, "nothing wider than the window");

    // Expand the live run and send text through its Send box.
    await rows.nth(0).getByRole("button", { name: /Expand/ }).click();
    const box = page.locator(`tr[data-expansion="${live}"]`);
    await box.getByLabel("Send input (audited)").fill(`hello-${label}`);
    await box.getByRole("button", { name: "Send input (audited)" }).click();
    await until("send receipt", async () => (await box.getByTestId("send-status").innerText()).includes("recorded"));
    await until("the program got it", async () => (await d.cli("session", "tail", live)).includes(`got: hello-${label}`), 20_000);
    const events = await d.json("session", "events", live);
    assert.ok((events.events ?? events).some((e) => e.kind === "input_sent" && JSON.stringify(e.detail).includes(`hello-${label}`)), "audited");
    assert.equal(await overflow(page), 0, "the expanded row fits too");
    await shot(page, `agent-page-${label}`);

    // The run's repository link leads to its page, which lists every task in it.
    await rows.nth(0).getByRole("link", { name: "app", exact: true }).click();
    await page.waitForURL(/\/repos\/app$/);
    await page.locator(`tr[data-task="${peopleTask}"]`).waitFor();
    for (const t of [liveTask, doneTask]) assert.equal(await page.locator(`tr[data-task="${t}"]`).count(), 1);
    assert.match(await page.getByTestId("clones").innerText(), /e2e: .*repo/);
    assert.equal(await page.locator("table.runs tbody tr[data-session]").first().getAttribute("data-session"), live);
    assert.match(await page.locator(`tr[data-task="${peopleTask}"]`).innerText(), /needs a person/);
    assert.equal(await overflow(page), 0, "nothing wider than the window");
    await shot(page, `repo-page-${label}`);
    assert.deepEqual(errors, []);
  });
}
