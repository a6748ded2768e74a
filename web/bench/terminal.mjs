// Benchmark: typing into a session's live terminal with the browser in the loop, for
// `drover-bench --only browser` (which starts the server, the session running `cat`,
// and measures `drover session attach` on the same session in the same run).
//
// Signed in to the server in $DROVER_HOME, Chromium opens the session's page and types
// KEYS keys into its terminal, GAP_MS apart. For each key, from the keydown (its event
// time) until the message carrying the echo is handed to the page's main thread (the
// socket lives in a worker, see src/socket-worker.ts), and until xterm.js has the echo
// in its rows (the DOM it paints from). And where the time to the message goes: from
// the keydown's event time until the page's listener runs (Chromium's input dispatch),
// until the page posts the key to the socket's worker (xterm.js and the page), until the
// worker sends it (the hop to the worker), until the echo's message reaches the worker
// (the socket's round trip: Chromium's network service both ways, the server, the
// session), and until the page's main thread has it (the shared ring). Prints one JSON
// line: {"message_ms": [...], "screen_ms": [...], "parts_ms": {...}}.
//
// Chromium defers a page's networking tasks after a key until its next frame
// (DeferRendererTasksAfterInput), which the socket worker sidesteps: `undeferred` as the
// fourth argument turns that deferral off, to show what is left of it.
//
//   DROVER_BIN=… DROVER_HOME=… node bench/terminal.mjs SESSION KEYS GAP_MS [undeferred]

import { browser, runningDrover, signedIn, until } from "../tests/harness.mjs";

const [session, keys = "200", gap = "30", mode = "as-shipped"] = process.argv.slice(2);
if (!session || !process.env.DROVER_HOME) {
  console.error("usage: DROVER_HOME=… node bench/terminal.mjs SESSION [KEYS] [GAP_MS]");
  process.exit(2);
}
const d = runningDrover();
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
// Letters no escape sequence ends with, as the attach measurement types.
const KEYS = "jkowyz";

const b = await browser(mode === "undeferred" ? ["--disable-features=DeferRendererTasksAfterInput"] : []);
try {
  const { page, errors } = await signedIn(b, d);
  // Before the page's own scripts: every message the terminal's socket worker
  // (src/socket-worker.ts) hands the page's main thread is noted with its time, ahead of
  // the page's handler. That is where xterm.js gets the echo. Messages come through the
  // shared ring (src/ring.ts: noted as the page wakes to read it) or, without one, as
  // posted messages.
  await page.addInitScript(() => {
    window.__messages = [];
    const note = (text) => window.__messages.push([performance.now(), text]);
    const wait = Atomics.waitAsync;
    Atomics.waitAsync = function (index, slot, value, timeout) {
      const r = wait.call(Atomics, index, slot, value, timeout);
      // The payloads of the ring's unread records, from its reader's position (ring.ts's
      // layout: after a 16-byte index, records of a 4-byte length, a kind, the bytes).
      const unread = () => {
        if (!(index instanceof Int32Array) || index.length !== 3 || slot !== 0) return;
        const bytes = new Uint8Array(index.buffer, 16);
        const at = (p) => bytes[p & (bytes.length - 1)];
        const head = Atomics.load(index, 1);
        let text = "";
        for (let p = Atomics.load(index, 2); p !== head; ) {
          const n = (at(p) | (at(p + 1) << 8) | (at(p + 2) << 16) | (at(p + 3) << 24)) >>> 0;
          for (let i = 0; i < n; i++) text += String.fromCharCode(at(p + 5 + i));
          p = (p + 5 + n) | 0;
        }
        note(text);
      };
      if (!r.async) {
        unread();
        return r;
      }
      return { async: true, value: r.value.then((v) => (unread(), v)) };
    };
    // Each key the page posts to the socket's worker, noted with its time (epoch ms, to
    // compare with the worker's).
    window.__posts = [];
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (m, ...rest) {
      if (m?.op === "send") window.__posts.push(performance.timeOrigin + performance.now());
      return post.call(this, m, ...rest);
    };
    const Base = window.Worker;
    window.Worker = class extends Base {
      constructor(...args) {
        super(...args);
        this.addEventListener("message", (m) => {
          const data = m.data?.data;
          if (data instanceof ArrayBuffer) note(new TextDecoder().decode(data));
        });
      }
    };
  });
  const workers = [];
  page.on("worker", (w) => workers.push(w));
  await page.goto(`${new URL(page.url()).origin}/sessions/${session}`);
  await until("connected", async () => (await page.getByTestId("pill").innerText()) === "connected", 30_000);
  await page.locator('[data-testid="terminal"] .xterm').click();
  // In the socket's worker: when each frame is sent, and when each message arrives
  // (epoch ms).
  await until("the socket's worker", async () => workers.length > 0, 10_000);
  const worker = workers[0];
  await worker.evaluate(() => {
    self.__sent = [];
    self.__received = [];
    const now = () => performance.timeOrigin + performance.now();
    const send = WebSocket.prototype.send;
    const heard = new WeakSet();
    WebSocket.prototype.send = function (data) {
      if (!heard.has(this)) {
        heard.add(this);
        this.addEventListener("message", () => self.__received.push(now()));
      }
      self.__sent.push(now());
      return send.call(this, data);
    };
  });
  await page.evaluate(() => {
    window.__keys = [];
    window.__heard = [];
    window.addEventListener(
      "keydown",
      (e) => {
        window.__keys.push(e.timeStamp);
        window.__heard.push(performance.now());
      },
      true,
    );
    // Resolved the first time the rows hold what has been typed so far (the echo's
    // message always comes first): the page is not polled while it works.
    const rows = document.querySelector('[data-testid="terminal"] .xterm-rows');
    new MutationObserver(() => {
      const w = window.__wait;
      if (w && w.shown === null && rows.textContent.replace(/\s+/g, "").endsWith(w.want)) {
        w.shown = performance.now();
        w.done();
      }
    }).observe(rows, { childList: true, subtree: true, characterData: true });
  });
  const message = [];
  const screen = [];
  const parts = { input: [], page: [], to_worker: [], round_trip: [], to_page: [] };
  let line = "";
  for (let i = 0; i < Number(keys); i++) {
    await sleep(Number(gap));
    const key = KEYS[i % KEYS.length];
    line += key;
    await page.evaluate((want) => {
      window.__messages.length = 0;
      const w = { want, shown: null };
      w.promise = new Promise((ok, fail) => {
        w.done = ok;
        setTimeout(() => fail(new Error(`no echo of ${JSON.stringify(want)} on screen in 10 s`)), 10_000);
      });
      window.__wait = w;
    }, line);
    await page.keyboard.press(key);
    const [down, heard, posted, got, shown, origin] = await page.evaluate(async (key) => {
      const w = window.__wait;
      await w.promise;
      const down = window.__keys.at(-1);
      const m = window.__messages.find(([t, text]) => t >= down && text.includes(key));
      if (!m) throw new Error(`no message carried the echo of ${key}`);
      return [down, window.__heard.at(-1), window.__posts.at(-1), m[0], w.shown, performance.timeOrigin];
    }, key);
    message.push(got - down);
    screen.push(shown - down);
    // The worker's times of this key: its send, and the last message before the page had
    // the echo (the echo's).
    const [sent, received] = await worker.evaluate(
      ([after, before]) => [self.__sent.find((t) => t >= after), self.__received.filter((t) => t <= before).at(-1)],
      [posted, origin + got],
    );
    if (sent !== undefined && received !== undefined && received >= sent) {
      parts.input.push(heard - down);
      parts.page.push(posted - (origin + heard));
      parts.to_worker.push(sent - posted);
      parts.round_trip.push(received - sent);
      parts.to_page.push(origin + got - received);
    }
    // A new line now and then, as the attach measurement does, so the line never wraps.
    if (i % 64 === 63) {
      await page.keyboard.press("Enter");
      line = "";
      await sleep(100);
    }
  }
  if (errors.length) throw errors[0];
  console.log(JSON.stringify({ message_ms: message, screen_ms: screen, parts_ms: parts }));
} finally {
  await b.close();
}
