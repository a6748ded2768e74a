// Plays a session's recording (asciicast v3, from `/export`) in a read-only xterm.

import { Terminal } from "@xterm/xterm";

interface Frame {
  at: number; // seconds from the start
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
  for (const line of lines.slice(1)) {
    let ev: unknown;
    try {
      ev = JSON.parse(line);
    } catch {
      continue;
    }
    if (!Array.isArray(ev) || typeof ev[0] !== "number" || typeof ev[1] !== "string") continue;
    at += ev[0];
    frames.push({ at, code: ev[1], data: typeof ev[2] === "string" ? ev[2] : "" });
  }
  return { cols, rows, frames, length: at };
}

export class Player {
  readonly term: Terminal;
  private index = 0;
  private position = 0; // seconds
  private playing = false;
  private raf = 0;
  private last = 0;
  speed = 1;

  constructor(el: HTMLElement, private cast: Cast, private onTick: (position: number, playing: boolean) => void) {
    this.term = new Terminal({ cols: cast.cols, rows: cast.rows, disableStdin: true, cursorBlink: false, scrollback: 1000, fontSize: 13, theme: { background: "#0f1115" } });
    this.term.open(el);
  }

  get length() {
    return this.cast.length;
  }

  play() {
    if (this.playing) return;
    if (this.index >= this.cast.frames.length) this.seek(0);
    this.playing = true;
    this.last = performance.now();
    const step = (now: number) => {
      if (!this.playing) return;
      this.position += ((now - this.last) / 1000) * this.speed;
      this.last = now;
      this.advance();
      if (this.index >= this.cast.frames.length) {
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

  /** Jumps to `seconds` (replaying from the start when going back). */
  seek(seconds: number) {
    if (seconds < this.position || seconds === 0) {
      this.term.reset();
      this.term.resize(this.cast.cols, this.cast.rows);
      this.index = 0;
    }
    this.position = Math.max(0, Math.min(seconds, this.cast.length));
    this.advance();
    this.onTick(this.position, this.playing);
  }

  private advance() {
    let out = "";
    while (this.index < this.cast.frames.length && this.cast.frames[this.index].at <= this.position) {
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
    this.term.dispose();
  }
}
