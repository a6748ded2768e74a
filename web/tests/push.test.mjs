// Getting told in the browser: the app is installable (manifest, icon) and registers its
// service worker; a push shaped like the server's for a held call (delivered through the
// DevTools protocol: headless Chromium has no push service) shows a notification with
// Approve; its Approve decides the call (the stand-in `claude` hears it) and a plain click
// opens the decision screen. The Notifications page keeps a member's choices, lists their
// browsers and sends a test, on a phone.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createECDH, randomBytes } from "node:crypto";
import { shot, signedIn, until } from "./harness.mjs";
import { closeClaude, overflow, tail as tailOf, withClaude } from "./claude-stand-in.mjs";

const PHONE = { width: 390, height: 844 };

// Two held calls, each printing the decision it heard; then it waits.
const STAND_IN = `
def ask(n, command):
    out = run_hook("PermissionRequest", {"tool_name": "Bash", "tool_input": {"command": command}})
    d = json.loads(out)["hookSpecificOutput"]["decision"] if out else {}
    print("DECISION %d: %s" % (n, d.get("behavior", "none")), flush=True)

ask(1, "make deploy")
ask(2, "make release")
time.sleep(600)
`;

let d, b, dir;
before(async () => {
  ({ d, b, dir } = await withClaude("push", STAND_IN, ["--allow-local-webhooks"]));
});
after(() => closeClaude({ d, b, dir }));

const tail = (run) => tailOf(d, run);
/** The shown notifications, as the page's service worker registration lists them. */
const shown = (page) =>
  page.evaluate(async () =>
    (await (await navigator.serviceWorker.ready).getNotifications()).map((n) => ({
      title: n.title,
      body: n.body,
      tag: n.tag,
      data: n.data,
      actions: (n.actions ?? []).map((a) => ({ action: a.action, title: a.title })),
    })),
  );
/** A click on the notification tagged `tag` (headless: the worker runs its click handling). */
const click = (page, tag, action = "") =>
  page.evaluate(({ tag, action }) => navigator.serviceWorker.ready.then((r) => r.active.postMessage({ test_click: tag, action })), { tag, action });

test("the app is installable and serves its service worker", async () => {
  const manifest = await fetch(`${d.url}/manifest.webmanifest`);
  assert.equal(manifest.headers.get("content-type"), "application/manifest+json");
  const m = await manifest.json();
  assert.equal(m.name, "Drover");
  assert.equal(m.start_url, "/inbox");
  assert.equal(m.display, "standalone");
  assert.ok(m.icons.some((i) => i.src === "/icon.svg"));
  const icon = await fetch(`${d.url}/icon.svg`);
  assert.equal(icon.headers.get("content-type"), "image/svg+xml");
  assert.match(await icon.text(), /^<svg /);
  const sw = await fetch(`${d.url}/sw.js`);
  assert.equal(sw.status, 200);
  assert.match(sw.headers.get("content-type"), /^text\/javascript/);
  assert.equal(sw.headers.get("cache-control"), "no-cache");
  assert.match(await sw.text(), /notificationclick/);
  const page = await (await fetch(`${d.url}/inbox`)).text();
  assert.match(page, /<link rel="manifest" href="\/manifest.webmanifest">/);
});

test("a pushed held call is approved from its notification; a plain click opens the inbox", async () => {
  const { context, page, errors } = await signedIn(b, d, PHONE);
  await context.grantPermissions(["notifications"], { origin: d.url });
  const cdp = await context.newCDPSession(page);
  const registrations = [];
  cdp.on("ServiceWorker.workerRegistrationUpdated", (e) => registrations.push(...e.registrations));
  await cdp.send("ServiceWorker.enable");

  // The app registers its worker at start; a reload puts the page under its control.
  await page.getByRole("link", { name: "Notifications" }).click();
  await page.waitForURL(/\/settings\/notifications$/);
  await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
  await page.reload();
  await page.getByRole("heading", { name: "Notifications" }).waitFor();
  await until("the page is controlled", () => page.evaluate(() => navigator.serviceWorker.controller?.scriptURL));
  const registrationId = await until("the registration", () => registrations.find((r) => r.scopeURL === `${d.url}/` && !r.isDeleted)?.registrationId);

  // A run holds a call; the push the server would send for it.
  const task = (await d.cli("task", "create", "--repo", "app", "--title", "ship it", "--agent", "claude-1")).trim();
  assert.match(task, /^tsk_/);
  const held = async (subject) =>
    until(`${subject} held`, async () => (await d.json("inbox")).items.find((i) => i.kind === "permission" && i.subject === subject && !i.decision), 30_000);
  const first = await held("make deploy");
  const run = first.session;
  const push = (item) =>
    cdp.send("ServiceWorker.deliverPushMessage", {
      origin: d.url,
      registrationId,
      data: JSON.stringify({ title: item.title, body: item.words, url: "/inbox", tag: "drover", runs: 1, attention: item.id }),
    });
  // Pushes `item` until the shown notifications satisfy `want` (what it returns is the
  // answer). Delivered again while not shown: a DevTools delivery can be dropped when it
  // lands as the worker is (re)starting, as on a loaded machine; a push service retries.
  const delivered = (what, item, want) => {
    let last = 0;
    return until(what, async () => {
      const ok = want(await shown(page));
      if (!ok && Date.now() - last > 2000) {
        last = Date.now();
        await push(item);
      }
      return ok;
    });
  };
  const [n] = await delivered("the notification", first, (l) => l.length === 1 && l);
  assert.equal(n.title, "ship it");
  assert.equal(n.body, "needs approval: Bash");
  assert.equal(n.tag, "drover");
  assert.deepEqual(n.data, { url: "/inbox", attention: first.id });
  assert.deepEqual(n.actions, [{ action: "approve", title: "Approve" }]);

  // Approve: the worker decides it with the browser's sign-in, and says so.
  await click(page, "drover", "approve");
  await until("DECISION 1", async () => (await tail(run)).includes("DECISION 1: allow"));
  await until("the confirmation", async () => (await shown(page)).some((x) => x.title === "Approved" && x.body === "needs approval: Bash"));
  await until("the approved call gone", async () => !(await d.json("inbox")).items.some((i) => i.id === first.id));

  // The next call: a plain click opens the decision screen (the inbox) in the open window.
  const second = await held("make release");
  await delivered("the second notification", second, (l) => l.some((x) => x.data?.attention === second.id));
  await click(page, "drover");
  await page.waitForURL(/\/inbox$/);
  await page.locator("article.inbox-card", { hasText: "make release" }).waitFor({ timeout: 30_000 });
  assert.equal(await overflow(page), 0);
  await shot(page, "push-opened-inbox-390");

  // A refused Approve (already decided) opens the inbox rather than failing silently.
  await d.cli("approve", second.id);
  await until("DECISION 2", async () => (await tail(run)).includes("DECISION 2: allow"));
  await page.goto(`${d.url}/settings/notifications`);
  await until("controlled again", () => page.evaluate(() => navigator.serviceWorker.controller?.scriptURL));
  await delivered("the third notification", second, (l) => l.some((x) => x.data?.attention === second.id));
  await click(page, "drover", "approve");
  await page.waitForURL(/\/inbox$/);
  assert.deepEqual(errors, []);
  await context.close();
});

/** A browser's subscription keys, as a real one would send them. */
function keys() {
  const ecdh = createECDH("prime256v1");
  ecdh.generateKeys();
  return { p256dh: ecdh.getPublicKey().toString("base64url"), auth: randomBytes(16).toString("base64url") };
}

test("the Notifications page keeps a member's choices, lists their browsers and sends a test (phone)", async () => {
  const { context, page, errors } = await signedIn(b, d, PHONE);
  await page.getByRole("link", { name: "Notifications" }).click();
  await page.waitForURL(/\/settings\/notifications$/);
  await page.getByRole("heading", { name: "Notifications" }).waitFor();
  await page.getByText("No browser is told yet.").waitFor();
  assert.equal(await page.getByRole("button", { name: "Enable on this browser" }).count(), 1);

  // Choices: events, quiet hours, zone and cool-down are saved and shown back.
  const form = page.getByRole("form", { name: "Notification choices" });
  await form.getByLabel("A run waits for its next instruction").waitFor();
  const before = await page.evaluate(() => fetch("/api/v1/me/notifications").then((r) => r.json()));
  assert.ok(before.events.includes("permission"));
  await form.getByLabel("A run finished").setChecked(!before.events.includes("finished"));
  await form.getByLabel("A run waits for its next instruction").setChecked(!before.events.includes("idle"));
  await form.getByLabel("From", { exact: true }).fill("22:00");
  await form.getByLabel("To", { exact: true }).fill("07:30");
  await form.getByLabel("Time zone").fill("Europe/Paris");
  await form.getByLabel(/Cool-down/).fill("120");
  assert.equal(await overflow(page), 0, "no wider than a phone");
  await shot(page, "notifications-390");
  await form.getByRole("button", { name: "Save" }).click();
  await form.getByRole("status").filter({ hasText: "Saved." }).waitFor();
  const after = await page.evaluate(() => fetch("/api/v1/me/notifications").then((r) => r.json()));
  const flip = (k) => (before.events.includes(k) ? [] : [k]);
  assert.deepEqual(
    [...after.events].sort(),
    [...before.events.filter((k) => k !== "finished" && k !== "idle"), ...flip("finished"), ...flip("idle")].sort(),
  );
  assert.equal(after.quiet, "22:00-07:30");
  assert.equal(after.zone, "Europe/Paris");
  assert.equal(after.cooldown_secs, 120);
  await page.reload();
  await form.getByLabel("From", { exact: true }).waitFor();
  assert.equal(await form.getByLabel("From", { exact: true }).inputValue(), "22:00");
  assert.equal(await form.getByLabel("To", { exact: true }).inputValue(), "07:30");
  assert.equal(await form.getByLabel("Time zone").inputValue(), "Europe/Paris");
  assert.equal(await form.getByLabel(/Cool-down/).inputValue(), "120");
  assert.equal(await form.getByLabel("A run finished").isChecked(), after.events.includes("finished"));

  // Refusals show inline: half a quiet window, and a zone the server does not know.
  await form.getByLabel("To", { exact: true }).fill("");
  await form.getByRole("button", { name: "Save" }).click();
  assert.match(await form.getByRole("alert").innerText(), /both a start and an end/);
  await form.getByLabel("To", { exact: true }).fill("07:30");
  await form.getByLabel("Time zone").fill("Mars/Olympus");
  await form.getByRole("button", { name: "Save" }).click();
  await until("the zone refused", async () => /Mars\/Olympus/.test(await form.getByRole("alert").innerText()));
  assert.equal(await overflow(page), 0);
  // No quiet hours at all is a choice too.
  await form.getByLabel("Time zone").fill("UTC");
  await form.getByLabel("From", { exact: true }).fill("");
  await form.getByLabel("To", { exact: true }).fill("");
  await form.getByRole("button", { name: "Save" }).click();
  await form.getByRole("status").filter({ hasText: "Saved." }).waitFor();
  assert.equal((await page.evaluate(() => fetch("/api/v1/me/notifications").then((r) => r.json()))).quiet, null);

  // A browser registered elsewhere is listed; a test goes to it; it can be removed.
  const k = keys();
  const added = await page.evaluate(
    (body) => fetch("/api/v1/push/subscriptions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then((r) => r.status),
    { endpoint: "http://127.0.0.1:9/push/elsewhere", ...k },
  );
  assert.equal(added, 201);
  await page.reload();
  const row = page.getByRole("list", { name: "Your browsers" }).getByRole("listitem");
  await row.first().waitFor();
  assert.equal(await row.count(), 1);
  assert.match(await row.innerText(), /127\.0\.0\.1:9/);
  await page.getByRole("button", { name: "Send a test" }).click();
  await page.getByRole("status").filter({ hasText: "A test notification was sent to 1 browser." }).waitFor();
  assert.equal(await overflow(page), 0);
  await row.getByRole("button", { name: "Remove" }).click();
  await page.getByText("No browser is told yet.").waitFor();
  assert.deepEqual(await page.evaluate(() => fetch("/api/v1/push/subscriptions").then((r) => r.json())), []);
  assert.deepEqual(errors, []);
  await context.close();
});
