// Plays a session's recording (asciicast v3, from `/export`) in a read-only xterm.

import { Terminal } from "@xterm/xterm";

interface Frame {
  at: number; // seconds from the start
  us: number; // the same, in whole µs (as the server counts: no float drift)
  code: string;
  data: string;
}

export interface Cast {
  cols: number;
  rows: number;
  frames: Frame[];
  length: number;
}

/** Parses asciicast v3 (a header line, then `[interval, code, data]` lines). */
export function parseCast(text: string): Cast {
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  if (lines.length === 0) throw new Error("the recording is empty");
  const header = JSON.parse(lines[0]);
  const cols = header?.term?.cols ?? 80;
  const rows = header?.term?.rows ?? 24;
  const frames: Frame[] = [];
  let at = 0;
  let us = 0;
  for (const line of lines.slice(1)) {
    let ev: unknown;
    try {
      ev = JSON.parse(line);
    } catch {
      continue;
    }
    if (!Array.isArray(ev) || typeof ev[0] !== "number" || typeof ev[1] !== "string") continue;
    at += ev[0];
    us += Math.round(ev[0] * 1e6);
    frames.push({ at, us, code: ev[1], data: typeof ev[2] === "string" ? ev[2] : "" });
  }
  return { cols, rows, frames, length: at };
}

/** The screen at a time of the recording, from the server's checkpoints. */
export interface Screen {
  cols: number;
  rows: number;
  data: Uint8Array;
}

/** Asks the server for the screen at `us` µs into the recording. */
export type ScreenAt = (us: number) => Promise<Screen>;

/** Output a seek replays here at most; further, it asks the server for the screen. */
const LOCAL_SEEK_CHARS = 256 * 1024;

export class Player {
  readonly term: Terminal;
  private index = 0;
  private position = 0; // seconds
  private playing = false;
  private raf = 0;
  private last = 0;
  /** Output characters before each frame (what replaying up to it costs). */
  private cost: number[];
  /** Bumped by every seek: a screen that comes back for an older one is dropped. */
  private seeking = 0;
  /** A screen is on its way: playback waits for it. */
  private pending = false;
  speed = 1;

  constructor(
    el: HTMLElement,
    private cast: Cast,
    private onTick: (position: number, playing: boolean) => void,
    private screenAt?: ScreenAt,
  ) {
    this.term = new Terminal({ cols: cast.cols, rows: cast.rows, disableStdin: true, cursorBlink: false, scrollback: 1000, fontSize: 13, theme: { background: "#0f1115" } });
    this.term.open(el);
    this.cost = [];
    let sum = 0;
    for (const f of cast.frames) {
      this.cost.push(sum);
      if (f.code === "o") sum += f.data.length;
    }
    this.cost.push(sum);
  }

  get length() {
    return this.cast.length;
  }

  play() {
    if (this.playing) return;
    if (this.index >= this.cast.frames.length && !this.pending) this.seek(0);
    this.playing = true;
    this.last = performance.now();
    const step = (now: number) => {
      if (!this.playing) return;
      if (!this.pending) {
        this.position += ((now - this.last) / 1000) * this.speed;
        this.advance();
      }
      this.last = now;
      if (this.index >= this.cast.frames.length && !this.pending) {
        this.playing = false;
        this.position = this.cast.length;
      } else {
        this.raf = requestAnimationFrame(step);
      }
      this.onTick(this.position, this.playing);
    };
    this.raf = requestAnimationFrame(step);
    this.onTick(this.position, true);
  }

  pause() {
    this.playing = false;
    cancelAnimationFrame(this.raf);
    this.onTick(this.position, false);
  }

  /**
   * Jumps to `seconds`. Near ahead, by playing the frames between; otherwise from the
   * server's screen at that time (its nearest checkpoint and the output after it), so a
   * jump costs the same anywhere in a recording of any length. Resolves once the screen
   * shows it.
   */
  seek(seconds: number): Promise<void> {
    const target = Math.max(0, Math.min(seconds, this.cast.length));
    const us = Math.round(target * 1e6);
    const to = this.frameAfter(us);
    const ahead = target >= this.position && !this.pending;
    const local = ahead ? this.cost[to] - this.cost[this.index] : this.cost[to];
    const token = ++this.seeking;
    this.position = target;
    if (!this.screenAt || local <= LOCAL_SEEK_CHARS) {
      this.pending = false;
      if (!ahead) this.restart();
      this.advance();
      this.onTick(this.position, this.playing);
      return new Promise((resolve) => this.term.write("", resolve));
    }
    this.pending = true;
    this.onTick(this.position, this.playing);
    return this.screenAt(us).then(
      (screen) =>
        new Promise<void>((resolve) => {
          if (token !== this.seeking) return resolve();
          this.term.reset();
          this.term.resize(Math.max(2, screen.cols), Math.max(1, screen.rows));
          this.index = to;
          this.term.write(screen.data, () => {
            if (token === this.seeking) this.pending = false;
            resolve();
          });
        }),
      (e) => {
        // No screen from the server: replay from the start here instead.
        console.warn("seeking through the server's screen failed; replaying:", e);
        if (token !== this.seeking) return;
        this.screenAt = undefined;
        this.pending = false;
        this.restart();
        this.advance();
        this.onTick(this.position, this.playing);
      },
    );
  }

  /** Back to a blank terminal at the recording's first size, before its first frame. */
  private restart() {
    this.term.reset();
    this.term.resize(this.cast.cols, this.cast.rows);
    this.index = 0;
  }

  /** The index of the first frame after `us` µs. */
  private frameAfter(us: number): number {
    const frames = this.cast.frames;
    let lo = 0;
    let hi = frames.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (frames[mid].us <= us) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private advance() {
    let out = "";
    const until = Math.round(this.position * 1e6);
    while (this.index < this.cast.frames.length && this.cast.frames[this.index].us <= until) {
      const f = this.cast.frames[this.index++];
      if (f.code === "o") out += f.data;
      else if (f.code === "r") {
        if (out) this.term.write(out);
        out = "";
        const m = f.data.match(/^(\d+)x(\d+)$/);
        if (m) this.term.resize(Math.max(2, +m[1]), Math.max(1, +m[2]));
      }
    }
    if (out) this.term.write(out);
  }

  dispose() {
    this.pause();
    this.seeking++;
    this.term.dispose();
  }
}
