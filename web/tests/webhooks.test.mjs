// The Webhooks page: an owner adds an endpoint (the secret is shown once), a bad URL
// is refused in place, deliveries show in the endpoint's log — retried until delivered
// — and Redeliver sends one again with the same message id.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { browser, shot, signedIn, startDrover, until } from "./harness.mjs";

let d, b, receiver;
const seen = [];
before(async () => {
  // The test receiver listens on loopback, where webhooks may go only when allowed.
  d = await startDrover(["--webhook-retry-secs", "0.2", "--allow-webhook-host", "127.0.0.1"]);
  b = await browser();
  // Fails the first request, then accepts.
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      seen.push({ id: req.headers["webhook-id"], signature: req.headers["webhook-signature"], type: JSON.parse(body).type });
      res.writeHead(seen.length === 1 ? 500 : 204).end();
    });
  });
  await new Promise((ok) => receiver.listen(0, "127.0.0.1", ok));
});
after(async () => {
  await b?.close();
  await d?.stop();
  receiver?.close();
});

test("webhooks: add, see deliveries retried until delivered, redeliver", async () => {
  const { page, errors } = await signedIn(b, d);
  await page.getByRole("link", { name: "Webhooks" }).click();
  const form = page.getByRole("form", { name: "Add a webhook" });
  await form.getByLabel("Endpoint URL").fill("ftp://example.com/hook");
  await form.getByRole("button", { name: "Add webhook" }).click();
  await until("the refusal", async () => /http:\/\/ or https:\/\//.test(await form.getByRole("alert").innerText().catch(() => "")));

  const url = `http://127.0.0.1:${receiver.address().port}/hook`;
  await form.getByLabel("Endpoint URL").fill(url);
  await form.getByLabel("session.started").check();
  await form.getByRole("button", { name: "Add webhook" }).click();
  await until("the secret shown", async () => /whsec_/.test(await page.getByTestId("secret").innerText().catch(() => "")));
  const hook = page.locator("[data-webhook]");
  assert.match(await hook.innerText(), /enabled/);

  await d.cli("session", "start", "--device", "e2e", "--", "true");
  await hook.getByRole("button", { name: "Deliveries" }).click();
  const row = hook.locator("tr[data-delivery]").first();
  await until("delivered after a retry", async () => /delivered/.test(await row.innerText().catch(() => "")), 20_000);
  const text = await row.innerText();
  assert.match(text, /session\.started/);
  assert.match(text, /\b2\b/, "two attempts");
  assert.match(text, /204/);
  await shot(page, "webhooks");

  const sentBefore = seen.length;
  await row.getByRole("button", { name: "Redeliver" }).click();
  await until("the redelivery", async () => seen.length > sentBefore, 10_000);
  assert.equal(seen.at(-1).id, seen.at(-2).id, "the same message id");
  assert.match(seen.at(-1).signature, /^v1,/);
  assert.deepEqual(errors, []);
});
