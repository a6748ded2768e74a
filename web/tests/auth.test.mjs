// Signing in: one-time links, no access without the cookie, and an expired sign-in
// shown as "rejected: auth expired" on the live terminal.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { browser, shot, signedIn, startDrover, until } from "./harness.mjs";

let d, b;
before(async () => {
  d = await startDrover(["--web-session-secs", "3"]);
  b = await browser();
});
after(async () => {
  await b?.close();
  await d?.stop();
});

test("a sign-in link works once and sets a strict HttpOnly cookie", async () => {
  const { context, page } = await signedIn(b, d, undefined, d.login);
  const cookies = await context.cookies();
  const c = cookies.find((c) => c.name === "drover_session");
  assert.ok(c, "session cookie set");
  assert.equal(c.httpOnly, true);
  assert.equal(c.sameSite, "Strict");
  assert.equal(await page.evaluate(() => document.cookie), "", "not readable from script");
  // Signing out ends the sign-in on the server, not only in this browser.
  const cookie = c.value;
  await page.getByRole("link", { name: "Sign out" }).click();
  await page.getByText("You are not signed in.").waitFor();
  const replay = await page.request.get(`${d.url}/api/v1/overview`, { headers: { cookie: `drover_session=${cookie}` } });
  assert.equal(replay.status(), 401);
  const again = await (await b.newContext()).newPage();
  await again.goto(d.login);
  await again.getByRole("alert").getByText(/already used or has expired/).waitFor();
  // The code travels in the fragment: never in a request line (nor a proxy's log).
  assert.match(d.login, /\/login#drl_/);
  assert.equal(again.url(), `${d.url}/login`, "and leaves the address bar at once");
});

test("a browser already signed in is asked before a link signs it in as someone else", async () => {
  const { page } = await signedIn(b, d);
  const link = JSON.parse(await d.cli("--json", "ui")).url;
  await page.goto(link);
  await page.getByText(/This browser is signed in as/).waitFor();
  await page.getByRole("button", { name: "Sign in with the link" }).click();
  await page.waitForURL(/\/sessions$/);
  // The retired form, with the code in the path, is never redeemed.
  const old = await page.request.get(`${d.url}/login/${link.split("#")[1]}`);
  assert.equal(old.status(), 410);
});

test("without signing in the app says how to sign in, and the API refuses", async () => {
  const page = await (await b.newContext()).newPage();
  await page.goto(`${d.url}/sessions`);
  await page.getByText("You are not signed in.").waitFor();
  assert.match(await page.locator("body").innerText(), /drover ui/);
  const api = await page.request.get(`${d.url}/api/v1/sandboxes`);
  assert.equal(api.status(), 401);
  // A cross-site POST with a stolen cookie is still refused.
  const link = JSON.parse(await d.cli("--json", "ui")).url;
  const ctx = await b.newContext();
  const p2 = await ctx.newPage();
  await p2.goto(link);
  await p2.waitForURL(/\/sessions$/);
  const forged = await p2.request.post(`${d.url}/api/v1/sessions`, {
    headers: { origin: "http://evil.example", "content-type": "application/json" },
    data: { device: "e2e", command: ["true"] },
  });
  assert.equal(forged.status(), 403);
});

test("an expired sign-in shows rejected: auth expired and does not retry", async () => {
  const id = await d.startSession(["sleep", "600"], ["--title", "expiry"]);
  const { page } = await signedIn(b, d);
  await new Promise((r) => setTimeout(r, 3500));
  await page.goto(`${d.url}/sessions/${id}`);
  await until("rejected pill", async () => (await page.getByTestId("pill").innerText()) === "rejected: auth expired");
  await page.waitForTimeout(1500);
  assert.equal(await page.getByTestId("pill").innerText(), "rejected: auth expired", "no retry loop");
  await shot(page, "auth-expired");
  await d.cli("session", "stop", id);
});
