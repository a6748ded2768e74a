// Members and permissions in the browser: an owner invites someone from the Members page;
// they join with a name and password; a member who does not operate a session's agent sees
// "no permission" on its live terminal (no retry, no Stop, no Send box, no ▶ Drop in);
// made admin, they can drop in; password sign-in works and wrong passwords are refused.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { browser, shot, signedIn, startDrover, until } from "./harness.mjs";

let d, b;
before(async () => {
  d = await startDrover();
  b = await browser();
});
after(async () => {
  await b?.close();
  await d?.stop();
});

const PASSWORD = "a long enough password";

/** The owner invites someone as `role` on the Members page; returns the link. */
async function invite(page, role) {
  await page.getByRole("link", { name: "Members" }).click();
  await page.getByRole("heading", { name: "Invite someone" }).waitFor();
  await page.getByRole("form", { name: "Invite someone" }).getByRole("combobox").selectOption(role);
  await page.getByRole("button", { name: "Create invitation link" }).click();
  return page.getByTestId("invite-link").inputValue();
}

/** Joins through `link` in a fresh browser context as `name`; returns the page. */
async function join(link, name) {
  const context = await b.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await page.goto(link);
  await page.getByText("You are invited as").waitFor();
  await page.getByLabel(/^Name/).fill(name);
  await page.getByLabel(/^Password/).fill(PASSWORD);
  await page.getByRole("button", { name: "Join" }).click();
  await page.waitForURL(/\/sessions$/);
  await page.getByText(`${name} · `).waitFor();
  return page;
}

test("an invited member joins, sees no permission on another's session, and drops in once made admin", async () => {
  const id = await d.startSession(["bash", "-c", "echo owner-only; sleep 600"], ["--title", "owners-run"]);
  const { page: owner } = await signedIn(b, d);
  const link = await invite(owner, "member");
  assert.match(link, /\/invite#dri_/, "the code rides in the fragment, never sent to a server");
  const bob = await join(link, "bob");

  // The list shows the row, but no ▶ Drop in for bob.
  await bob.getByText("owners-run").waitFor();
  const row = bob.locator("tr", { hasText: "owners-run" });
  assert.equal(await row.getByRole("link", { name: "▶ Drop in" }).count(), 0, "no Drop in control for a non-operator");

  // Opening the session anyway: "no permission", a notice, and no retrying.
  await bob.goto(`${d.url}/sessions/${id}`);
  await until("no permission pill", async () => (await bob.getByTestId("pill").innerText()) === "no permission");
  assert.match(await bob.getByTestId("ended-banner").innerText(), /owner or admin, or the operator/);
  assert.equal(await bob.getByRole("button", { name: "Stop" }).count(), 0);
  assert.equal(await bob.getByRole("button", { name: /Send input/ }).count(), 0);
  await bob.waitForTimeout(1500);
  assert.equal(await bob.getByTestId("pill").innerText(), "no permission", "does not retry");
  // The API agrees: scrollback and input are refused.
  const text = await bob.request.get(`${d.url}/api/v1/sessions/${id}/text`);
  assert.equal(text.status(), 403);
  await shot(bob, "no-permission");

  // The owner makes bob an admin; now bob may drop in.
  await owner.getByRole("link", { name: "Members" }).click();
  await owner.getByLabel("Role of bob").selectOption("admin");
  await until("role changed", async () => (await d.json("member", "list")).find((m) => m.name === "bob")?.role === "admin");
  await bob.reload();
  await until("connected", async () => (await bob.getByTestId("pill").innerText()) === "connected");
  await bob.getByRole("button", { name: "Stop" }).waitFor();

  // The audit trail says who invited whom, who joined and who changed which role.
  const audit = (await d.cli("audit", "export", "--since", "2000-01-01")).trim().split("\n").map((l) => JSON.parse(l));
  const kinds = audit.map((e) => e.kind);
  for (const k of ["member_invited", "member_joined", "role_changed"]) assert.ok(kinds.includes(k), `${k} in ${kinds}`);
  const change = audit.find((e) => e.kind === "role_changed");
  assert.equal(change.detail.member, "bob");
  assert.equal(change.detail.to, "admin");
  await d.cli("session", "stop", id);
});

test("password sign-in works, wrong passwords are refused, and the Members page lists tokens", async () => {
  const { page: owner } = await signedIn(b, d);
  const link = await invite(owner, "member");
  const carol = await join(link, "carol");
  await carol.getByRole("link", { name: "Sign out" }).click();
  await carol.getByText("You are not signed in.").waitFor();
  const form = carol.getByRole("form", { name: "Sign in" });
  await form.getByLabel("Name").fill("carol");
  await form.getByLabel("Password").fill("not the password");
  await form.getByRole("button", { name: "Sign in" }).click();
  await form.getByText(/wrong name or password/).waitFor();
  await form.getByLabel("Password").fill(PASSWORD);
  await form.getByRole("button", { name: "Sign in" }).click();
  await carol.getByText("carol · member").waitFor();
  // A member sees no Invite form and no role selects.
  await carol.getByRole("link", { name: "Members" }).click();
  await carol.getByRole("heading", { name: "Your API tokens" }).waitFor();
  assert.equal(await carol.getByRole("heading", { name: "Invite someone" }).count(), 0);
  assert.equal(await carol.getByLabel("Role of bob").count(), 0);
  await shot(carol, "members");
});

test("an owner removes a member: their browser is signed out at once and what they did stays", async () => {
  const { page: owner } = await signedIn(b, d);
  const link = await invite(owner, "member");
  const carl = await join(link, "carl");
  await owner.getByRole("link", { name: "Members" }).click();
  const row = owner.getByRole("row").filter({ has: owner.getByRole("cell", { name: "carl", exact: true }) });
  await row.getByRole("button", { name: "Remove…" }).click();
  await owner.getByRole("button", { name: "Remove carl now" }).click();
  await until("carl no longer listed", async () => (await d.json("member", "list")).every((m) => m.name !== "carl"));
  const me = await carl.request.get(`${d.url}/api/v1/me`);
  assert.equal(me.status(), 401, "carl's browser sign-in ended with the removal");
  const audit = (await d.cli("audit", "export", "--since", "2000-01-01")).trim().split("\n").map((l) => JSON.parse(l));
  assert.ok(audit.some((e) => e.kind === "member_removed" && e.detail.member === "carl"), "the removal is audited");
  await carl.context().close();
});
