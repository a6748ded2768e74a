// An exported recording read by asciinema's own parser: asciinema-player (the asciinema
// project's player, from npm) loads `drover session export`'s asciicast v3 in Chromium
// and plays it to the end.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { browser, startDrover, until } from "./harness.mjs";

const require = createRequire(import.meta.url);
const PLAYER = require.resolve("asciinema-player/dist/bundle/asciinema-player.min.js");

let d, b;
before(async () => {
  d = await startDrover();
  b = await browser();
});
after(async () => {
  await b?.close();
  await d?.stop();
});

test("asciinema's player reads an export: its output, its length and its exit", async () => {
  const id = await d.startSession(["sh", "-c", "printf 'hello from drover\\n'; sleep 1.5; exit 3"], ["--cols", "100", "--rows", "30"]);
  await until("ended", async () => (await d.json("session", "show", id)).outcome === "failed", 20_000);
  const cast = await d.cli("session", "export", id);
  assert.equal(JSON.parse(cast.split("\n")[0]).version, 3);

  const page = await b.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e));
  await page.setContent('<div id="player"></div>');
  await page.addScriptTag({ path: PLAYER });
  const read = await page.evaluate(async (data) => {
    const logged = [];
    const logger = { log() {}, debug() {}, info() {}, warn: (...a) => logged.push(a.join(" ")), error: (...a) => logged.push(a.join(" ")) };
    const player = window.AsciinemaPlayer.create({ data, parser: "asciicast" }, document.getElementById("player"), { preload: true, logger, cols: 100, rows: 30 });
    for (let i = 0; i < 100 && player.getDuration() === undefined; i++) await new Promise((r) => setTimeout(r, 50));
    await player.seek("100%");
    await new Promise((r) => setTimeout(r, 300));
    return { duration: player.getDuration(), text: document.getElementById("player").innerText, logged };
  }, cast);
  assert.deepEqual(read.logged, [], "the parser had nothing to say");
  assert.ok(read.duration >= 1.4 && read.duration < 10, `its length runs to the exit: ${read.duration}`);
  assert.match(read.text, /hello from drover/);
  assert.deepEqual(errors, []);
});
