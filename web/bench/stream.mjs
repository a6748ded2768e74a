// Benchmark: a session streaming a large file with Chromium watching its live terminal,
// for `drover-bench --only browser` (which starts the session and measures the same
// stream with no viewer in the same run).
//
// The session's program waits for a line, prints the file, then
// `STREAM-DONE <µs it took> <epoch ms at its end> END`. Signed in to the server in
// $DROVER_HOME, Chromium opens the session's page; once connected, the script prints
// `ready` and waits for a line on its standard input; then it types Enter, and waits
// until that line is in xterm.js's rows. Prints one JSON line: when it was seen (epoch
// ms), the rows then, the page's long tasks (the Long Tasks API: over 50 ms) from the
// Enter on and, apart, before it (while it loaded), how often it asked for a re-sync,
// having fallen behind, and how much output it took in.
//
//   DROVER_BIN=… DROVER_HOME=… node bench/stream.mjs SESSION   (a line on stdin after `ready`)

import { browser, noteResyncAsks, runningDrover, signedIn, until } from "../tests/harness.mjs";

const [session] = process.argv.slice(2);
if (!session || !process.env.DROVER_HOME) {
  console.error("usage: DROVER_HOME=… node bench/stream.mjs SESSION");
  process.exit(2);
}
const d = runningDrover();

const b = await browser();
try {
  const { page, errors } = await signedIn(b, d);
  await page.addInitScript(() => {
    window.__long = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__long.push({ ms: e.duration, at: e.startTime });
    }).observe({ type: "longtask", buffered: true });
  });
  await noteResyncAsks(page);
  await page.goto(`${new URL(page.url()).origin}/sessions/${session}`);
  await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected", 30_000);
  await page.locator('[data-testid="terminal"] .xterm').click();
  const done = page.evaluate(
    () =>
      new Promise((ok, fail) => {
        const rows = document.querySelector('[data-testid="terminal"] .xterm-rows');
        const seen = () => /STREAM-DONE \d+ \d+ END/.test(rows.textContent);
        const finish = () => ok({ seen_at_ms: Date.now(), rows: [...rows.children].map((r) => r.textContent.replace(/\s+$/, "")) });
        new MutationObserver(() => seen() && finish()).observe(rows, { childList: true, subtree: true, characterData: true });
        setTimeout(() => fail(new Error("the end of the stream never showed in 300 s")), 300_000);
      }),
  );
  // The bench waits for a quiet machine before the stream starts, as it does for the
  // stream with no viewer.
  console.log("ready");
  await new Promise((go) => process.stdin.once("data", go));
  process.stdin.pause();
  const enterAt = await page.evaluate(() => performance.now());
  await page.keyboard.press("Enter");
  const result = await done;
  const long = await page.evaluate(() => window.__long);
  const longTasksMs = long.filter((t) => t.at >= enterAt).map((t) => t.ms);
  const loadTasksMs = long.filter((t) => t.at < enterAt).map((t) => t.ms);
  const resyncs = await page.evaluate(() => window.__resyncAsks.length);
  const consumed = await page.evaluate(() => window.__consumedBytes);
  if (errors.length) throw errors[0];
  console.log(JSON.stringify({ ...result, long_tasks_ms: longTasksMs, load_tasks_ms: loadTasksMs, resyncs_asked: resyncs, consumed_bytes: consumed }));
} finally {
  await b.close();
}
