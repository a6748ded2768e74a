// Needs you from the lists, on a phone (390x844): a stand-in for Claude Code (named
// `claude`, first on the PATH of `drover up`'s runs, as in inbox.test.mjs) holds two tool
// calls. The Sessions list row's badge opens its actions and Approve there reaches the
// stand-in; the Tasks list row denies the next one with a message. Rows that wait on no
// one keep their height, and nothing is wider than the phone.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { shot, signedIn, until } from "./harness.mjs";
import { closeClaude, overflow, tail as tailOf, withClaude } from "./claude-stand-in.mjs";

const PHONE = { width: 390, height: 844 };

const STAND_IN = `
print("stand-in claude", flush=True)

def ask(n, command):
    out = run_hook("PermissionRequest", {"tool_name": "Bash", "tool_input": {"command": command}})
    d = json.loads(out)["hookSpecificOutput"]["decision"] if out else {}
    print("DECISION %d: %s msg=%s" % (n, d.get("behavior", "none"), d.get("message", "")), flush=True)

ask(1, "make deploy")
ask(2, "echo '<b>bold</b>' && rm -rf build")
print("ALL ASKED", flush=True)
time.sleep(600)
`;

let d, b, dir, task;
before(async () => {
  ({ d, b, dir } = await withClaude("lists", STAND_IN));
  task = (await d.cli("task", "create", "--repo", "app", "--title", "ship it", "--agent", "claude-1")).trim();
});
after(() => closeClaude({ d, b, dir }));

const tail = (run) => tailOf(d, run);

test("a held call is approved from the Sessions list and the next denied from the Tasks list", async () => {
  // A run that waits on no one, for the row heights.
  const quiet = await d.startSession(["sleep", "600"]);
  const held = await until("the first call held", async () => (await d.json("inbox")).items.find((i) => i.task === task && i.kind === "permission"), 30_000);
  const run = held.session;
  assert.match(run, /^ses_/);

  // On a desktop, the waiting row is as tall as a quiet one; its actions are one tap away.
  {
    const { page, errors } = await signedIn(b, d);
    const row = page.locator(`tr[data-session="${run}"]`);
    const toggle = row.getByTestId("needs-toggle");
    await toggle.waitFor({ timeout: 30_000 });
    await page.locator(`tr[data-session="${quiet}"]`).waitFor();
    const [a, q] = [await row.boundingBox(), await page.locator(`tr[data-session="${quiet}"]`).boundingBox()];
    assert.equal(a.height, q.height, "a waiting row keeps the list's row height");
    assert.equal(await page.locator(".needs-row").count(), 0, "closed until tapped");
    await page.context().close();
    assert.deepEqual(errors, []);
  }

  const { page, errors } = await signedIn(b, d, PHONE);
  // 1. The Sessions list: the row's badge opens its actions; Approve reaches the stand-in.
  const row = page.locator(`tr[data-session="${run}"]`);
  const toggle = row.getByTestId("needs-toggle");
  await toggle.waitFor({ timeout: 30_000 });
  assert.equal(await toggle.innerText(), "needs approval: Bash ▸");
  assert.equal(await toggle.getAttribute("aria-expanded"), "false");
  await toggle.click();
  assert.equal(await toggle.getAttribute("aria-expanded"), "true");
  const panel = page.locator(`#needs-${run}`);
  const card = panel.locator("article.inbox-card", { hasText: "make deploy" });
  await card.waitFor();
  assert.equal(await card.getByTestId("subject").innerText(), "make deploy");
  assert.equal(await card.getByRole("link", { name: "Open terminal" }).getAttribute("href"), `/sessions/${run}`);
  const approve = card.getByRole("button", { name: "Approve", exact: true });
  const box = await approve.boundingBox();
  assert.ok(box.height >= 44, `Approve is tappable: ${JSON.stringify(box)}`);
  assert.ok((await toggle.boundingBox()).height >= 44, "the badge is tappable");
  assert.equal(await overflow(page), 0, "the Sessions list is no wider than a phone");
  await shot(page, "lists-sessions-needs-390");
  await approve.click();
  await until("DECISION 1", async () => (await tail(run)).includes("DECISION 1: allow msg="));
  await until("the approved card gone", async () => (await card.count()) === 0);

  // 2. The Tasks list: the next call waits on the task's row; Deny with a message.
  await page.getByRole("link", { name: "Tasks" }).click();
  const taskRow = page.locator(`tr[data-task="${task}"]`);
  const taskToggle = taskRow.getByTestId("needs-toggle");
  await taskToggle.waitFor({ timeout: 30_000 });
  assert.equal(await taskRow.getByTestId("task-turn").count(), 1);
  await taskToggle.click();
  const second = page.locator(`#needs-${task} article.inbox-card`, { hasText: "rm -rf build" });
  await second.waitFor({ timeout: 30_000 });
  assert.equal(await second.getByTestId("subject").innerText(), "echo '<b>bold</b>' && rm -rf build");
  assert.equal(await second.locator("b").count(), 0, "a command is text, not markup");
  const deny = second.getByRole("button", { name: "Deny" });
  assert.ok((await deny.boundingBox()).height >= 44, "Deny is tappable");
  await second.getByLabel("Message for the agent with Deny (optional)").fill("not on a Friday");
  assert.equal(await overflow(page), 0, "the Tasks list is no wider than a phone");
  await shot(page, "lists-tasks-needs-390");
  await deny.click();
  await until("DECISION 2", async () => (await tail(run)).includes("DECISION 2: deny msg=not on a Friday"));
  await until("the denied card gone", async () => (await second.count()) === 0);
  await until("the task row's toggle gone", async () => (await taskToggle.count()) === 0);

  // 3. Back on Sessions: nothing waits, so the row has no toggle and no panel.
  await page.getByRole("link", { name: "Sessions" }).first().click();
  await row.waitFor();
  await until("the run's toggle gone", async () => (await toggle.count()) === 0);
  assert.equal(await page.locator(".needs-row").count(), 0);
  assert.equal(await overflow(page), 0);
  assert.deepEqual(errors, []);
});
