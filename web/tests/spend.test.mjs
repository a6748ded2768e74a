// Spend in the browser: a stand-in harness writes a Claude Code transcript while it runs;
// the live terminal page's Cost updates as responses land, the run stops at the
// workspace's spend cap (released, "spend cap: …"), and the Spend page shows the month
// against the cap, a chart by day and the spend by model.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browser, shot, signedIn, startDrover, until } from "./harness.mjs";

const claude = mkdtempSync(join(tmpdir(), "drover-claude-"));
let d, b;
before(async () => {
  process.env.CLAUDE_CONFIG_DIR = claude;
  d = await startDrover();
  b = await browser();
});
after(async () => {
  await b?.close();
  await d?.stop();
  rmSync(claude, { recursive: true, force: true });
});

/** One transcript line, stamped when the script writes it. */
const line = (n, model, output) =>
  `{"type":"assistant","requestId":"req_${n}","timestamp":"'"$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)"'","message":{"id":"msg_${n}","model":"${model}",` +
  `"usage":{"input_tokens":100,"output_tokens":${output},"cache_creation_input_tokens":1000,"cache_read_input_tokens":9000}}}`;

test("a run's cost updates live and it stops at the spend cap", async () => {
  await d.cli("spend", "--cap", "0.025");
  const cwd = mkdtempSync(join(tmpdir(), "drover-work-"));
  const dir = join(claude, "projects", cwd.replace(/[^A-Za-z0-9]/g, "-"));
  const f = join(dir, "t.jsonl");
  const sonnet = "claude-sonnet-4-5-20250929";
  // Response 1 at once; response 2 after 4 s (the page shows $0.01 first, exactly
  // $0.00975, then $0.02, exactly $0.021); response 3 on Opus after 4 s more, which
  // crosses the $0.025 cap.
  const script =
    `mkdir -p '${dir}' && echo '${line(1, sonnet, 200)}' >> '${f}' && sleep 4 && echo '${line(2, sonnet, 300)}' >> '${f}' && sleep 4 && ` +
    `echo '${line(3, "claude-opus-4-5-20251101", 40)}' >> '${f}' && sleep 600`;
  const id = await d.startSession(["bash", "-c", script], ["--title", "spender", "--cwd", cwd]);
  const { page } = await signedIn(b, d);
  await page.goto(`${d.url}/sessions/${id}`);
  // Money reads to the cent everywhere; the exact figures are in the tooltip.
  await until("the first response's cost", async () => (await page.getByTestId("cost").first().innerText()).startsWith("$0.01 "));
  assert.match(await page.getByTestId("cost").first().innerText(), /generation \$0\.01 \+ cache reads <\$0\.01\) · 1 turn · 89% cache hit/);
  assert.match(await page.getByTestId("cost").first().getAttribute("title"), /exactly \$0\.00975: generation \$0\.00705 \+ cache reads \$0\.0027/);
  await until("the second response's cost", async () => (await page.getByTestId("cost").first().innerText()).startsWith("$0.02 "), 20_000);
  // The third response crosses the cap: the run is stopped and says why.
  await until("stopped at the cap", async () => (await page.getByTestId("pill").innerText()) === "session released", 30_000);
  assert.match(await page.getByTestId("ended-banner").innerText(), /spend cap: the workspace has spent \$0\.0333 this month of its \$0\.0250 cap/);
  await shot(page, "spend-cap");

  await page.getByRole("link", { name: "Spend" }).click();
  await page.getByTestId("month").waitFor();
  assert.match(await page.getByTestId("month").innerText(), /This month: \$0\.03 of a \$0\.03 monthly cap/);
  assert.match(await page.getByTestId("month").locator("strong").getAttribute("title"), /exactly \$0\.033\d*/);
  await page.getByTestId("spend-chart").waitFor();
  const models = page.getByRole("table", { name: "Spend by Model" });
  await models.getByText(sonnet).waitFor();
  await models.getByText("claude-opus-4-5-20251101").waitFor();
  await shot(page, "spend");
  rmSync(cwd, { recursive: true, force: true });
});
