// End to end in a real browser: start a session, see it appear with the badge, drop in,
// type and see the echo, send through the Send box and find the audited event, stop it
// and see the pill and banner change, open the finished page.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { browser, noteResyncAsks, screenText, shot, signedIn, startDrover, until } from "./harness.mjs";

let d, b;
before(async () => {
  d = await startDrover();
  b = await browser();
});
after(async () => {
  await b?.close();
  await d?.stop();
});

test("a session from start to finished page", async () => {
  const { page, errors } = await signedIn(b, d);
  await page.getByRole("heading", { name: "Sandboxes running now" }).waitFor();
  assert.equal(await page.getByTestId("running-badge").count(), 0, "no badge while nothing runs");

  const id = await d.startSession(["bash", "--norc", "--noprofile"], ["--title", "browser flow"]);
  // The row and the badge appear without a reload.
  const row = page.locator(`tr[data-session="${id}"]`);
  await row.waitFor({ timeout: 15_000 });
  await until("badge 1", async () => (await page.getByTestId("running-badge").innerText()) === "1");
  assert.match(await row.innerText(), /Remote/);
  assert.match(await row.innerText(), /browser flow/);
  await shot(page, "sessions-desktop");

  await row.getByRole("link", { name: "▶ Drop in" }).click();
  await page.waitForURL(new RegExp(`/sessions/${id}$`));
  await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected");
  assert.match(await page.getByTestId("typing-banner").innerText(), /not recorded/);
  assert.match(await page.getByTestId("progress").innerText(), /Last progress: unknown/, "output alone is not progress");

  // Direct typing reaches the program (and is not audited).
  await page.locator('[data-testid="terminal"] .xterm').click();
  await page.keyboard.type("echo typed-$((6*7))\n");
  await until("echo of typed input", async () => (await screenText(page)).includes("typed-42"));

  // The Send box goes through the audited path.
  await page.getByLabel("Send input (audited)").fill("echo sent-$((5*5))");
  await page.getByLabel("Send input (audited)").press("Control+Enter");
  await until("send receipt", async () => (await page.getByTestId("send-status").innerText()).includes("recorded"));
  await until("echo of sent input", async () => (await screenText(page)).includes("sent-25"));
  const events = await d.json("session", "events", id);
  const sent = (events.events ?? events).filter((e) => e.kind === "input_sent");
  assert.equal(sent.length, 1, "exactly one audited input (typing is not recorded)");
  assert.match(JSON.stringify(sent[0].detail), /sent-\$\(\(5\*5\)\)/);
  await until("event on the page", async () => (await page.locator("section.did").innerText()).includes("input sent (audited)"));
  await shot(page, "live-desktop");

  // Stop asks first; keeping it running changes nothing.
  await page.getByRole("button", { name: "Stop", exact: true }).click();
  await page.getByRole("button", { name: "Keep running" }).click();
  assert.equal(await page.getByTestId("pill").innerText(), "connected");
  // Stop: the pill and the banner change.
  await page.getByRole("button", { name: "Stop", exact: true }).click();
  await page.getByRole("button", { name: "Stop session" }).click();
  await until("released pill", async () => (await page.getByTestId("pill").innerText()) === "session released", 20_000);
  assert.match(await page.getByTestId("ended-banner").innerText(), /released/);
  assert.equal(await page.getByRole("button", { name: "Stop" }).count(), 0, "no Stop once ended");
  await until("badge gone", async () => (await page.getByTestId("running-badge").count()) === 0);

  // The finished page: summary rows, what it did, final screen, recording.
  await page.reload();
  const summary = page.getByTestId("summary");
  await summary.waitFor();
  const text = await summary.innerText();
  for (const label of ["Agent", "Working on", "Stage", "State", "Started", "Ended", "Duration", "Exit code", "Reason", "Repo", "Device", "Cost"]) {
    assert.match(text, new RegExp(`^${label}$`, "m"), `summary row ${label}`);
  }
  assert.match(text, /Released/);
  await until("the kill in the record", async () => (await page.locator("section.did").innerText()).includes("session killed"));
  await until("final screen", async () => (await screenText(page, '[data-testid="final-screen"]')).includes("sent-25"), 30_000);
  // Every row of the final screen is inside its frame (none cut off at the bottom).
  const overhang = await page.evaluate(() => {
    const frame = document.querySelector('[data-testid="final-screen"]');
    const screen = frame.querySelector(".xterm-screen");
    return screen.getBoundingClientRect().bottom - frame.getBoundingClientRect().bottom;
  });
  assert.ok(overhang <= 0, `the final screen overhangs its frame by ${overhang}px`);
  await page.getByTestId("play").click();
  await until("recording plays", async () => (await screenText(page, '[data-testid="player"]')).includes("typed-42"), 20_000);
  await shot(page, "finished-desktop");

  // The All filter lists it with its last run.
  await page.goto(`${d.url}/sessions?filter=all`);
  await page.getByRole("heading", { name: "All sandboxes" }).waitFor();
  const ended = page.locator(`tr[data-session="${id}"]`);
  await ended.waitFor();
  assert.match(await ended.innerText(), /last run released/i);
  assert.equal(await ended.locator('[title="The session was deliberately stopped before finishing — not a failure."]').count(), 1);
  assert.deepEqual(errors, []);
});

test("search narrows the list, the filter switches, and Load more reaches every sandbox", async () => {
  const { page, errors } = await signedIn(b, d);
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push(await d.startSession(["sleep", "600"], ["--title", i === 1 ? "find the needle" : `haystack ${i}`]));
  await until("three live rows", async () => (await page.locator("tbody tr[data-session]").count()) >= 3);
  await page.getByLabel("Search sessions").fill("needle");
  await until("one row", async () => (await page.locator("tbody tr[data-session]").count()) === 1);
  assert.match(await page.locator("tbody tr[data-session]").innerText(), /find the needle/);
  assert.match(page.url(), /q=needle/);
  await page.getByLabel("Search sessions").fill("");
  await until("all rows back", async () => (await page.locator("tbody tr[data-session]").count()) >= 3);
  for (const id of ids) await d.cli("session", "stop", id);
  await until("live list empty", async () => (await page.locator("tbody tr[data-session]").count()) === 0, 20_000);
  await page.getByRole("button", { name: "Open" }).click();
  await page.getByRole("heading", { name: "All open sandboxes" }).waitFor();
  await page.getByRole("button", { name: "All" }).click();
  await page.getByRole("heading", { name: "All sandboxes" }).waitFor();
  await until("all rows", async () => (await page.locator("tbody tr[data-session]").count()) >= 4);

  // More than one batch (50): the list stops at a batch, Load more brings the rest.
  for (let i = 0; i < 6; i++) await Promise.all(Array.from({ length: 8 }, (_, j) => d.startSession(["true"], ["--title", `batch ${i}-${j}`])));
  await page.reload();
  await page.getByRole("heading", { name: "All sandboxes" }).waitFor();
  await until("first batch", async () => (await page.locator("tbody tr[data-session]").count()) === 50);
  const total = (await d.json("session", "list", "--all", "--limit", "1000")).length;
  assert.ok(total > 50, `${total} sandboxes`);
  await page.getByRole("link", { name: "Load more" }).click();
  await until("every sandbox", async () => (await page.locator("tbody tr[data-session]").count()) === total);
  assert.equal(await page.getByRole("link", { name: "Load more" }).count(), 0, "no Load more at the end");
  for (const path of ["/devices", "/devices/e2e", "/activity"]) {
    await page.goto(`${d.url}${path}`);
    await page.locator("main h1").first().waitFor();
    await page.locator("main tbody tr, main .timeline li").first().waitFor();
    await shot(page, `${path.slice(1).replace("/", "-")}-desktop`);
  }

  // Each device says what it does with its runs: this one sandboxes them.
  await page.goto(`${d.url}/devices`);
  const sandbox = page.locator("main tbody tr .badge", { hasText: "sandboxed" }).first();
  await sandbox.waitFor();
  assert.match((await sandbox.getAttribute("title")) ?? "", /Every run is sandboxed: Landlock ABI \d+/);

  // The device page keeps rows loaded with Load more when a change refreshes it.
  await page.goto(`${d.url}/devices/e2e`);
  await until("device batch", async () => (await page.locator("tbody tr").count()) === 50);
  await page.getByRole("link", { name: "Load more" }).click();
  await until("device rows", async () => (await page.locator("tbody tr").count()) === total);
  await d.startSession(["sleep", "600"], ["--title", "one more"]);
  await until("the new one on top", async () => (await page.locator("tbody tr").first().innerText()).includes("one more"));
  assert.equal(await page.locator("tbody tr").count(), total + 1, "rows loaded with Load more stay");

  // On a phone, its sessions are cards: every cell in view.
  await page.setViewportSize({ width: 375, height: 740 });
  const state = page.locator('tbody tr td[data-label="State"]').first();
  const box = await state.boundingBox();
  assert.ok(box && box.x + box.width <= 375, `State cell in view: ${JSON.stringify(box)}`);
  await shot(page, "device-375");
  assert.deepEqual(errors, []);
});

test("nothing a program prints or a title says can inject HTML", async () => {
  const { page, errors } = await signedIn(b, d);
  const evil = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`;
  const id = await d.startSession(["sh", "-c", `printf '%s\\n' '${evil}'; sleep 600`], ["--title", evil]);
  const row = page.locator(`tr[data-session="${id}"]`);
  await row.waitFor();
  assert.ok((await row.innerText()).includes(evil), "the title shows as text");
  await page.goto(`${d.url}/sessions/${id}`);
  await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected");
  await until("output shown", async () => (await screenText(page)).includes("onerror"));
  assert.equal(await page.locator("main img").count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.ok((await page.locator("h1.title").innerText()).includes("<script>"));
  await d.cli("session", "stop", id);
  assert.deepEqual(errors, []);
});

test("on a phone-sized screen nothing overflows and the key row works", async () => {
  const { page, errors } = await signedIn(b, d, { width: 375, height: 740 });
  const id = await d.startSession(["bash", "--norc", "--noprofile"], ["--title", "a rather long title for a narrow phone screen to wrap"]);
  await page.locator(`tr[data-session="${id}"]`).waitFor();
  const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.equal(await overflow(), 0, "the Sessions page fits 375 px");
  await shot(page, "sessions-375");
  await page.goto(`${d.url}/sessions/${id}`);
  await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected");
  assert.equal(await overflow(), 0, "the live page fits 375 px");
  // The terminal's last row (where the prompt sits) is in view above the pinned key row.
  const gap = await page.evaluate(() => {
    const frame = document.querySelector('[data-testid="terminal"]').getBoundingClientRect();
    const keys = document.querySelector('[role="toolbar"]').getBoundingClientRect();
    return { frameBottom: frame.bottom, keysTop: keys.top, viewport: innerHeight };
  });
  assert.ok(gap.frameBottom <= gap.keysTop + 1 && gap.keysTop < gap.viewport, `terminal and key row in view: ${JSON.stringify(gap)}`);
  // The window's size is the session's size.
  await until("session resized to the phone", async () => (await d.json("session", "show", id)).cols < 60);
  await page.setViewportSize({ width: 700, height: 740 });
  await until("session resized with the window", async () => (await d.json("session", "show", id)).cols > 60);
  await page.setViewportSize({ width: 375, height: 740 });
  // Esc, then an arrow-up recalls the last command in bash: typed through the key row.
  await page.locator('[data-testid="terminal"] .xterm').click();
  await page.keyboard.type("echo from-phone\n");
  await until("first echo", async () => (await screenText(page)).includes("from-phone"));
  await page.getByRole("button", { name: "Up arrow" }).click();
  await until("history recalled", async () => (await screenText(page)).split("echo from-phone").length === 3);
  const keyRow = page.getByRole("toolbar", { name: /Terminal keys/ });
  assert.equal(await keyRow.evaluate((el) => getComputedStyle(el).position), "fixed");
  await shot(page, "live-375");
  await d.cli("session", "stop", id);
  await until("ended", async () => (await page.getByTestId("pill").innerText()).startsWith("session "), 20_000);
  await page.reload();
  await page.getByTestId("summary").waitFor();
  assert.equal(await overflow(), 0, "the finished page fits 375 px");
  await shot(page, "finished-375");
  for (const path of ["/devices", "/devices/e2e", "/activity"]) {
    await page.goto(`${d.url}${path}`);
    await page.locator("h1").first().waitFor();
    assert.equal(await overflow(), 0, `${path} fits 375 px`);
    await shot(page, `${path.slice(1).replace("/", "-")}-375`);
  }
  assert.deepEqual(errors, []);
});

test("Shift with the wheel scrolls back even when the program has captured the mouse", async () => {
  const { page, errors } = await signedIn(b, d);
  // Once the viewer is there (a joining viewer gets the screen, not the history): 300
  // numbered lines, then mouse reporting on, as a full-screen program would.
  const script = "read go; for i in $(seq 1 300); do echo line-$i; done; printf '\\033[?1000h\\033[?1006h'; sleep 600";
  const id = await d.startSession(["bash", "-c", script], ["--title", "mouse mode"]);
  await page.goto(`${d.url}/sessions/${id}`);
  await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected");
  await page.locator('[data-testid="terminal"] .xterm').click();
  await page.keyboard.press("Enter");
  await until("all lines", async () => (await screenText(page)).includes("line-300"));
  const box = await page.locator('[data-testid="terminal"] .xterm-screen').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.keyboard.down("Shift");
  for (let i = 0; i < 10; i++) await page.mouse.wheel(0, -200);
  await page.keyboard.up("Shift");
  await until("scrolled back", async () => !(await screenText(page)).includes("line-300"));
  assert.deepEqual(errors, []);
  await d.cli("session", "stop", id);
});

test("a terminal slower than a flood is sent only what it takes in and skips to the program's present", async () => {
  const { page, errors } = await signedIn(b, d);
  const script = "read go; seq 1 600000 | sed 's/^/flood line /'; echo FLOOD-END; sleep 600";
  const id = await d.startSession(["bash", "-c", script], ["--title", "flood"]);
  await noteResyncAsks(page);
  await page.goto(`${d.url}/sessions/${id}`);
  await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected");
  await page.locator('[data-testid="terminal"] .xterm').click();
  // The page's main thread at a twentieth of its speed: xterm.js parses far slower than
  // the program prints (10 MB) and the socket delivers.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Emulation.setCPUThrottlingRate", { rate: 20 });
  await page.keyboard.press("Enter");
  await until("the end of the flood", async () => /flood line 600000\s+FLOOD-END/.test(await screenText(page)), 60_000);
  await cdp.send("Emulation.setCPUThrottlingRate", { rate: 1 });
  // The server sent no more than the page took in (its window ahead), and a fresh
  // screen in place of the rest: the page was done with far less than the flood.
  const consumed = await page.evaluate(() => window.__consumedBytes);
  assert.ok(consumed > 0 && consumed < 5e6, `the page took in ${consumed} bytes of a 10 MB flood`);
  // What the program prints next is shown as usual.
  assert.deepEqual(errors, []);
  await d.cli("session", "stop", id);
});

test("the live terminal reads its socket through shared memory, and without it by posted messages", async () => {
  for (const shared of [true, false]) {
    const id = await d.startSession(["bash", "--norc", "--noprofile"], ["--title", `ring ${shared}`]);
    const { page, errors } = await signedIn(b, d);
    await page.addInitScript((shared) => {
      // Without Atomics.waitAsync the page cannot wait on shared memory: the worker
      // posts what the socket brings instead.
      if (!shared) Object.defineProperty(Atomics, "waitAsync", { value: undefined });
      const post = Worker.prototype.postMessage;
      Worker.prototype.postMessage = function (m, ...rest) {
        if (m?.op === "open") window.__ring = m.ring instanceof SharedArrayBuffer;
        return post.call(this, m, ...rest);
      };
    }, shared);
    await page.goto(`${d.url}/sessions/${id}`);
    await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected");
    // The server's headers isolate the page, which is what lets it share memory.
    assert.equal(await page.evaluate(() => crossOriginIsolated), true);
    assert.equal(await page.evaluate(() => window.__ring), shared);
    await page.locator('[data-testid="terminal"] .xterm').click();
    // About 2.7 MB in one go: more than the ring holds (2 MiB).
    await page.keyboard.type(`clear; seq 1 400000; echo END-${shared}\n`);
    await until("the end of the output", async () => /400000\s+END-/.test(await screenText(page)), 60_000);
    assert.match(await screenText(page), new RegExp(`399999\\s+400000\\s+END-${shared}`));
    // The session's end comes through in order, and the page says so.
    await d.cli("session", "stop", id);
    await until("the end on the pill", async () => /^session /.test(await page.getByTestId("pill").innerText()));
    assert.deepEqual(errors, []);
    await page.close();
  }
});
