// Tasks in the browser: the Tasks list, a task's Workflow view and Sessions panel, a
// question an agent asks answered from the page, and the hand-off that finishes it.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DROVER, browser, repoAndAgent, shot, signedIn, startDrover, until } from "./harness.mjs";

let d, b, dir;
before(async () => {
  d = await startDrover();
  b = await browser();
  dir = mkdtempSync(join(tmpdir(), "drover-e2e-repo-"));
  await repoAndAgent(d, dir, "bot", `#!/bin/sh\nset -e\necho "working the $DROVER_STAGE stage"\nanswer=$('${DROVER}' task ask "Which colour should the button be?")\necho "told: $answer"\necho "$answer" > colour.txt\ngit add colour.txt\ngit -c user.name=a -c user.email=a@a commit -qm "$DROVER_STAGE"\n'${DROVER}' task advance --note "made it $answer"\nsleep 60\n`);
});
after(async () => {
  await b?.close();
  await d?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("a task asks a question, is answered from its page and hands off", async () => {
  const { page, errors } = await signedIn(b, d);
  const id = (await d.cli("task", "create", "--repo", "app", "--title", "Colour the <b>button</b>", "--type", "bug", "--stages", "code", "--assign", "code=bot")).trim();
  await page.getByRole("link", { name: "Tasks" }).click();
  const row = page.locator(`tr[data-task="${id}"]`);
  await row.waitFor();
  assert.match(await row.innerText(), /bug/);
  assert.match(await row.innerText(), /Colour the <b>button<\/b>/);
  await until("Drop in on the task row", async () => (await row.getByRole("link", { name: "▶ Drop in" }).count()) === 1);
  await shot(page, "tasks-desktop");

  await row.getByRole("link", { name: /Colour the/ }).click();
  await page.waitForURL(new RegExp(`/tasks/${id}$`));
  await page.getByRole("heading", { name: "Workflow" }).waitFor();
  assert.equal(await page.getByRole("link", { name: "▶ Drop in" }).count(), 1, "the live run has Drop in in the Workflow view");
  assert.equal(await page.getByRole("button", { name: "Finish session" }).count(), 1);
  const answer = page.getByLabel("Answer to Which colour should the button be?");
  await answer.waitFor({ timeout: 20_000 });
  await shot(page, "task-question-desktop");
  // Before it hands off, the run has output but no evidence of progress beyond its question.
  await page.getByRole("link", { name: "▶ Drop in" }).click();
  await until("progress line", async () => /Last progress: question asked/.test(await page.getByTestId("progress").innerText()));
  await page.goBack();
  await answer.waitFor();
  // Whose turn it is: the task says what it waits on, and the sidebar counts it.
  assert.equal(await page.getByTestId("task-turn").innerText(), "waiting for an answer: Which colour should the button be?");
  await until("Tasks badge", async () => (await page.getByTestId("waiting-badge").count()) === 1 && (await page.getByTestId("waiting-badge").innerText()) === "1");
  await answer.fill("green");
  await page.getByRole("button", { name: "Answer" }).click();
  await until("task done", async () => (await page.locator("header .badge").last().innerText()) === "Done", 30_000);
  await until("Tasks badge gone", async () => (await page.getByTestId("waiting-badge").count()) === 0);
  await until("View link", async () => (await page.getByRole("link", { name: "View →" }).count()) === 1, 20_000);
  const activity = await page.locator("ol.timeline").last().innerText();
  assert.match(activity, /question asked/);
  assert.match(activity, /question answered/);
  assert.match(activity, /stage advanced/);
  assert.match(activity, /made it green/);
  await shot(page, "task-done-desktop");

  // The run's page names its agent, task and stage.
  await page.getByRole("link", { name: "View →" }).click();
  const summary = page.getByTestId("summary");
  await summary.waitFor();
  const text = await summary.innerText();
  assert.match(text, /Agent\s+bot/);
  assert.match(text, /Stage\s+Code/);
  assert.match(text, /Repo\s+app/);
  assert.match(text, /Completed/);

  // The Sessions list names the repo; the activity feed names the task and the run.
  await page.goto(`${d.url}/sessions?filter=all`);
  await until("repo column", async () => (await page.locator('tbody tr td[data-label="Repo"]').first().innerText()) === "app");
  await page.goto(`${d.url}/activity`);
  const feed = page.locator("ol.feed");
  await until("titles in the feed", async () => /task Colour the <b>button<\/b>/.test(await feed.innerText()));
  assert.equal(await feed.locator("b").count(), 0, "a title is text, not markup");

  await page.setViewportSize({ width: 375, height: 740 });
  await page.goto(`${d.url}/tasks/${id}`);
  await page.getByRole("heading", { name: "Workflow" }).waitFor();
  assert.equal(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth), 0);
  await shot(page, "task-375");
  assert.deepEqual(errors, []);
});

test("a task filed from the New task form runs through a merge stage into main", async () => {
  const repo = join(dir, "repo");
  const merger = join(dir, "merger.sh");
  writeFileSync(
    merger,
    `#!/bin/sh\nset -e\necho "$DROVER_STAGE work" >> work.txt\ngit add work.txt\ngit -c user.name=a -c user.email=a@a commit -qm "$DROVER_STAGE"\n'${DROVER}' task advance --note "did $DROVER_STAGE"\nsleep 60\n`,
  );
  chmodSync(merger, 0o755);
  await d.cli("agent", "create", "merger", "--harness", "custom", "--", merger, "{prompt}");
  await d.cli("workflow", "set", "--stages", "code,merge");
  const { page, errors } = await signedIn(b, d);
  await page.getByRole("link", { name: "Tasks" }).click();
  await page.getByRole("button", { name: "New task" }).click();
  const form = page.getByRole("form", { name: "File a task" });
  await form.waitFor();
  await until("the workspace's stages", async () => /Stages: Code → Merge \(merges\)/.test(await form.innerText()));
  // Bad input gets the server's reason, and nothing is filed.
  await form.getByLabel("Title").fill("   ");
  await form.getByRole("button", { name: "File task" }).click();
  await until("refusal", async () => /title/.test(await form.getByRole("alert").innerText().catch(() => "")));
  await shot(page, "task-form-error");

  await form.getByLabel("Title").fill("Write <img src=x onerror=alert(1)> the work file");
  await form.getByLabel("Type").selectOption("chore");
  await form.getByLabel("Agent").selectOption("merger");
  await form.getByLabel("What needs doing").fill("Append a line per stage.\nThen merge.");
  await form.getByRole("button", { name: "File task" }).click();
  await page.waitForURL(/\/tasks\/tsk_/);
  await page.getByRole("heading", { name: "Workflow" }).waitFor();
  assert.equal(await page.locator("h1.title").innerText(), "Write <img src=x onerror=alert(1)> the work file");
  assert.equal(await page.locator("table.workflow .badge", { hasText: "merges" }).count(), 1);
  await until("task done", async () => (await page.locator("header .badge").last().innerText()) === "Done", 30_000);
  const activity = await page.locator("ol.timeline").last().innerText();
  assert.match(activity, /branch merged/);
  assert.match(activity, /drover\/[0-9a-f]{12}-write-img-src-x-onerror-alert-1-the-work into main/);
  assert.equal(execFileSync("git", ["-C", repo, "show", "main:work.txt"]).toString(), "code work\nmerge work\n");
  await shot(page, "task-merged");
  assert.deepEqual(errors, []);
});

test("Abandon asks first, tears the sandbox down and leaves the task; Abandon task ends it", async () => {
  const { page, errors } = await signedIn(b, d);
  const id = (await d.cli("task", "create", "--repo", "app", "--title", "Abandon me", "--stages", "code", "--assign", "code=bot")).trim();
  await page.goto(`${d.url}/tasks/${id}`);
  await page.getByRole("heading", { name: "Workflow" }).waitFor();
  await until("a live run", async () => (await page.getByRole("link", { name: "▶ Drop in" }).count()) === 1, 30_000);
  // Nothing happens until it is confirmed.
  await page.getByRole("button", { name: "Abandon", exact: true }).click();
  await page.getByRole("button", { name: "Keep it" }).click();
  assert.equal((await d.json("task", "show", id)).task.sandbox_state, "active");
  await page.getByRole("button", { name: "Abandon", exact: true }).click();
  await shot(page, "task-abandon-confirm-desktop");
  await page.getByRole("button", { name: "Abandon sandbox" }).click();
  await until("sandbox abandoned", async () => (await d.json("task", "show", id)).task.sandbox_state === "abandoned", 20_000);
  const t = await d.json("task", "show", id);
  assert.equal(t.task.status, "open", "the row's Abandon leaves the task open");
  await until("Launch offered", async () => (await page.getByRole("button", { name: "Launch session" }).count()) === 1, 20_000);
  // The task-level control ends the task, after asking.
  await page.getByRole("button", { name: "Abandon task" }).click();
  await page.getByRole("button", { name: "Abandon task" }).last().click();
  await until("task abandoned", async () => (await d.json("task", "show", id)).task.status === "abandoned", 20_000);
  assert.deepEqual(errors, []);
});

test("a prepared task waits with Activate, which brings its session online", async () => {
  const { page, errors } = await signedIn(b, d);
  const id = (await d.cli("task", "create", "--repo", "app", "--title", "Prepared", "--stages", "code", "--assign", "code=bot", "--prepare-only")).trim();
  await page.goto(`${d.url}/tasks/${id}`);
  await page.getByRole("heading", { name: "Workflow" }).waitFor();
  await until("Activate offered", async () => (await page.getByRole("button", { name: "Activate" }).count()) === 1, 20_000);
  assert.match(await page.getByTestId("task-turn").innerText(), /ready to start: code/);
  assert.equal((await d.json("task", "show", id)).sessions.length, 0, "set up, not started");
  await page.getByRole("button", { name: "Activate" }).click();
  await until("a live run", async () => (await page.getByRole("link", { name: "▶ Drop in" }).count()) === 1, 30_000);
  assert.equal(await page.getByRole("button", { name: "Activate" }).count(), 0);
  assert.deepEqual(errors, []);
});
