// Needs you in the browser, on a phone (390x844): a stand-in for Claude Code (named
// `claude`, first on the PATH of `drover up`'s runs) runs the hooks of the `--settings`
// Drover starts it with, as the hook contract says, and prints what it was told. Its held
// calls are listed on /inbox and counted on the sidebar; Approve, Deny with a message
// (from the run's own page) and Approve always reach it; its finished turn waits with
// Open terminal and nothing to approve.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { DROVER, shot, signedIn, until } from "./harness.mjs";
import { closeClaude, overflow, tail as tailOf, withClaude } from "./claude-stand-in.mjs";

const PHONE = { width: 390, height: 844 };
// A long command with markup in it: it wraps inside the card and is shown as text.
const LONG = `rm -rf build && echo '<img src=x onerror=alert(1)>' > ${"/very/long/path/segment".repeat(12)}/out.txt`;

// Three held calls (the third offers a rule to keep), then a finished turn; then it
// waits for input. Working the task "Edit the readme", an edit instead, then a question.
const STAND_IN = `
print("stand-in claude", flush=True)

def ask(n, command, suggest):
    ev = {"tool_name": "Bash", "tool_input": {"command": command}}
    if suggest:
        ev["permission_suggestions"] = [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test"}], "behavior": "allow", "destination": "localSettings"}]
    out = run_hook("PermissionRequest", ev)
    d = json.loads(out)["hookSpecificOutput"]["decision"] if out else {}
    rules = ",".join(r["toolName"] + "(" + r["ruleContent"] + ")@" + u["destination"] for u in d.get("updatedPermissions", []) for r in u["rules"])
    print("DECISION %d: %s msg=%s rules=%s" % (n, d.get("behavior", "none"), d.get("message", ""), rules), flush=True)

if "Edit the readme" in args[-1]:
    ev = {"tool_name": "Edit", "tool_input": {"file_path": "README.md", "old_string": "old line", "new_string": "new line\\nmore <b>bold</b>"}}
    out = run_hook("PermissionRequest", ev)
    print("EDIT: " + json.loads(out)["hookSpecificOutput"]["decision"]["behavior"], flush=True)
    told = subprocess.run([${JSON.stringify(DROVER)}, "task", "ask", "Which colour should the button be?"], capture_output=True, text=True)
    print("told:", told.stdout.strip(), told.stderr.strip(), flush=True)
    time.sleep(600)

ask(1, "make deploy", False)
ask(2, ${JSON.stringify(LONG)}, False)
ask(3, "npm test", True)
run_hook("Stop", {"stop_hook_active": False})
print("TURN OVER", flush=True)
line = sys.stdin.readline()
run_hook("UserPromptSubmit", {"prompt": line.strip()})
print("GOT:", line.strip(), flush=True)
time.sleep(600)
`;

let d, b, dir, task;
before(async () => {
  ({ d, b, dir } = await withClaude("inbox", STAND_IN));
  task = (await d.cli("task", "create", "--repo", "app", "--title", "ship it", "--agent", "claude-1")).trim();
});
after(() => closeClaude({ d, b, dir }));

const tail = (run) => tailOf(d, run);

test("held calls are approved, denied and approved always from a phone; a finished turn waits", async () => {
  const { page, errors } = await signedIn(b, d, PHONE);
  await page.getByRole("link", { name: /Needs you/ }).click();
  await page.waitForURL(/\/inbox$/);
  await page.getByRole("heading", { name: "Needs you" }).waitFor();

  // 1. The held call: its words, its run (the task's title) and task, its tool and command.
  const card = (subject) => page.locator("article.inbox-card", { has: page.locator('[data-testid="subject"]', { hasText: subject }) });
  const first = card("make deploy");
  await first.waitFor({ timeout: 30_000 });
  assert.match(await first.locator(".inbox-words").innerText(), /^needs approval: Bash$/);
  assert.equal(await first.getByTestId("run-link").innerText(), "ship it");
  const run = (await first.getByTestId("run-link").getAttribute("href")).replace("/sessions/", "");
  assert.match(run, /^ses_/);
  assert.equal(await first.getByTestId("task-link").getAttribute("href"), `/tasks/${task}`);
  assert.equal(await first.locator(".inbox-meta code").innerText(), "Bash");
  assert.equal(await first.getByTestId("subject").innerText(), "make deploy");
  assert.equal(await first.getByRole("button", { name: "Approve", exact: true }).count(), 1);
  assert.equal(await first.getByRole("button", { name: "Deny" }).count(), 1);
  assert.equal(await first.getByRole("button", { name: /Approve always/ }).count(), 0, "no rule was offered");
  assert.equal(await first.getByRole("link", { name: "Open terminal" }).getAttribute("href"), `/sessions/${run}`);
  await until("the sidebar badge", async () => (await page.getByTestId("needs-you-badge").innerText()) === "1");
  assert.equal(await overflow(page), 0, "no wider than a phone");
  const approve = await first.getByRole("button", { name: "Approve", exact: true }).boundingBox();
  assert.ok(approve.height >= 44 && approve.width >= 44, `Approve is tappable: ${JSON.stringify(approve)}`);
  await shot(page, "inbox-held-390");

  // 2. Approve reaches the harness, and the item goes.
  await first.getByRole("button", { name: "Approve", exact: true }).click();
  await until("DECISION 1", async () => (await tail(run)).includes("DECISION 1: allow msg= rules="));
  await until("the approved item gone", async () => (await first.count()) === 0);

  // 3. The next call, on the run's own page: a long command wraps and is text; Deny says why.
  await page.goto(`${d.url}/sessions/${run}`);
  const waits = page.getByTestId("session-waits");
  const second = waits.locator("article.inbox-card", { hasText: "rm -rf build" });
  await second.waitFor({ timeout: 30_000 });
  assert.equal(await second.getByTestId("subject").innerText(), LONG);
  assert.equal(await second.locator("img").count(), 0, "a command is text, not markup");
  assert.equal(await second.getByRole("link", { name: "Open terminal" }).count(), 0, "its terminal is on this page");
  const box = await second.getByTestId("subject").boundingBox();
  assert.ok(box.x >= 0 && box.x + box.width <= PHONE.width, `the command wraps inside the window: ${JSON.stringify(box)}`);
  assert.equal(await overflow(page), 0, "the run's page is no wider than a phone");
  await second.getByLabel("Message for the agent with Deny (optional)").fill("keep the build");
  await second.scrollIntoViewIfNeeded();
  await shot(page, "session-waits-390");
  await second.getByRole("button", { name: "Deny" }).click();
  await until("DECISION 2", async () => (await tail(run)).includes("DECISION 2: deny msg=keep the build rules="));

  // 4. Approve always keeps the rule it names.
  await page.goto(`${d.url}/inbox`);
  const third = card("npm test");
  await third.waitFor({ timeout: 30_000 });
  assert.equal(await third.getByTestId("always-rules").innerText(), "keeps Bash(npm test)");
  assert.equal(await overflow(page), 0);
  await shot(page, "inbox-always-390");
  await third.getByRole("button", { name: "Approve always for this task" }).click();
  await until("DECISION 3", async () => (await tail(run)).includes("DECISION 3: allow msg= rules=Bash(npm test)@session"));
  assert.deepEqual((await d.json("task", "show", task)).allow_rules, ["Bash(npm test)"]);

  // 5. The finished turn: it waits for input, with Open terminal and nothing to approve.
  await until("TURN OVER", async () => (await tail(run)).includes("TURN OVER"));
  const idle = page.locator('article.inbox-card[data-kind="idle"]');
  await idle.waitFor({ timeout: 30_000 });
  assert.equal(await idle.locator(".inbox-words").innerText(), "waiting for its next instruction");
  assert.equal(await idle.getByRole("link", { name: "Open terminal" }).getAttribute("href"), `/sessions/${run}`);
  assert.equal(await idle.getByRole("button").count(), 0, "no decision buttons");
  assert.equal(await page.locator("article.inbox-card").count(), 1);
  await until("the sidebar badge", async () => (await page.getByTestId("needs-you-badge").innerText()) === "1");
  assert.equal(await overflow(page), 0);
  await shot(page, "inbox-idle-390");

  // Its run's page shows what it waits on too.
  await idle.getByRole("link", { name: "Open terminal" }).click();
  await page.waitForURL(new RegExp(`/sessions/${run}$`));
  await until("the run's page shows it waits", async () =>
    (await page.getByTestId("session-waits").locator(".inbox-words").innerText()) === "waiting for its next instruction",
  );

  // 6. Input moves it on: nothing waits, and the badge goes.
  await d.cli("session", "input", run, "carry on");
  await until("GOT", async () => (await tail(run)).includes("GOT: carry on"));
  await until("the run's page no longer waits", async () => (await page.getByTestId("session-waits").count()) === 0);
  await until("the badge gone", async () => (await page.getByTestId("needs-you-badge").count()) === 0);
  await page.getByRole("link", { name: /Needs you/ }).click();
  await page.getByText("Nothing waits on you.").waitFor();
  assert.deepEqual(errors, []);
});

test("an edit shows its change; a question is answered from the list (desktop)", async () => {
  const { page, errors } = await signedIn(b, d);
  const id = (await d.cli("task", "create", "--repo", "app", "--title", "Edit the readme", "--agent", "claude-1")).trim();
  // With no live updates, the list goes stale: a decision taken meanwhile elsewhere.
  await until("the edit held", async () => (await d.json("inbox")).items.some((i) => i.tool === "Edit"), 30_000);
  await page.context().route("**/api/v1/stream", (r) => r.abort());
  await page.goto(`${d.url}/inbox`);
  const edit = page.locator('article.inbox-card[data-kind="permission"]', { hasText: "needs approval: Edit" });
  await edit.waitFor({ timeout: 30_000 });
  assert.equal(await edit.getByTestId("subject").innerText(), "README.md");
  assert.deepEqual(await edit.locator(".inbox-diff .del").allInnerTexts(), ["- old line"]);
  assert.deepEqual(await edit.locator(".inbox-diff .add").allInnerTexts(), ["+ new line", "+ more <b>bold</b>"]);
  assert.equal(await edit.locator(".inbox-diff b").count(), 0, "a diff is text, not markup");
  await shot(page, "inbox-edit-desktop");
  const run = (await edit.getByTestId("run-link").getAttribute("href")).replace("/sessions/", "");
  await d.cli("approve", await edit.getAttribute("data-item"));
  await until("the edit approved", async () => (await tail(run)).includes("EDIT: allow"));
  // Deciding it again here is refused, and the server's reason shows on the card.
  await edit.getByRole("button", { name: "Deny" }).click();
  await until("the refusal", async () => /already decided/.test(await edit.getByRole("alert").innerText()));
  await shot(page, "inbox-refused-desktop");
  await page.context().unroute("**/api/v1/stream");
  await page.reload();

  // The question: any member answers it here; the run is told.
  const q = page.locator('article.inbox-card[data-kind="question"]');
  await q.waitFor({ timeout: 30_000 });
  assert.equal(await q.locator(".inbox-words").innerText(), "waiting for an answer: Which colour should the button be?");
  assert.equal(await q.getByTestId("task-link").getAttribute("href"), `/tasks/${id}`);
  assert.equal(await q.getByRole("button", { name: "Approve", exact: true }).count(), 0);
  await until("the sidebar badge", async () => (await page.getByTestId("needs-you-badge").innerText()) === "1");
  await shot(page, "inbox-question-desktop");
  await q.getByLabel("Answer to Which colour should the button be?").fill("green");
  await q.getByRole("button", { name: "Answer" }).click();
  await until("told", async () => (await tail(run)).includes("told: green"));
  await until("the question gone", async () => (await q.count()) === 0);
  await until("the badge gone", async () => (await page.getByTestId("needs-you-badge").count()) === 0);
  await page.getByText("Nothing waits on you.").waitFor();
  assert.deepEqual(errors, []);
});
