// Plays a session's recording in a read-only xterm, fetching it a window at a time
// (`/recording`) as it plays and seeking through the server's screens (`/screen?t=`):
// neither the page nor the server holds a whole recording, however long it ran.

import { Terminal } from "@xterm/xterm";

/** One event of a recording: µs since its start, asciicast v3's code, its data. */
export interface Frame {
  t_us: number;
  code: string;
  data: string;
}

/** A window of a recording, as `GET /api/v1/sessions/{id}/recording` gives it. */
export interface RecordingWindow {
  cols: number;
  rows: number;
  length_us: number;
  from: number;
  events: Frame[];
  next?: number | null;
}

/** Fetches the window of the recording that starts at output offset `from`. */
export type WindowAt = (from: number) => Promise<RecordingWindow>;

/** The screen at a time of the recording, from the server's checkpoints. */
export interface Screen {
  cols: number;
  rows: number;
  data: Uint8Array;
  /** The output offset the screen stands for: where the frames after it start. */
  offset: number;
}

/** Asks the server for the screen at `us` µs into the recording. */
export type ScreenAt = (us: number) => Promise<Screen>;

/** Output a seek replays here at most; further, it asks the server for the screen. */
const LOCAL_SEEK_CHARS = 256 * 1024;

export class Player {
  readonly term: Terminal;
  /** The recording's length, seconds. */
  readonly length: number;
  /** The frames fetched and not yet played past (and a few played ones). */
  private frames: Frame[];
  /** The next frame to play. */
  private index = 0;
  /** Where the window after the fetched frames starts; null once they reach the end. */
  private next: number | null;
  /** A window on its way. */
  private fetching: Promise<void> | null = null;
  private position = 0; // seconds
  private playing = false;
  private raf = 0;
  private last = 0;
  /** Bumped by every seek: a screen or window that comes back for an older one is dropped. */
  private seeking = 0;
  /** A screen or the next window is on its way: playback waits for it. */
  private pending = false;
  /** The screen shown came from the server for this µs: frames at or before it are on it. */
  private shown = -1;
  speed = 1;

  /** Opens the player on `el` with the recording's first window. */
  static async open(el: HTMLElement, windowAt: WindowAt, screenAt: ScreenAt, onTick: (position: number, playing: boolean) => void): Promise<Player> {
    return new Player(el, await windowAt(0), windowAt, screenAt, onTick);
  }

  private constructor(
    el: HTMLElement,
    first: RecordingWindow,
    private windowAt: WindowAt,
    private screenAt: ScreenAt,
    private onTick: (position: number, playing: boolean) => void,
  ) {
    this.length = first.length_us / 1e6;
    this.frames = first.events;
    this.next = first.next ?? null;
    this.term = new Terminal({ cols: first.cols, rows: first.rows, disableStdin: true, cursorBlink: false, scrollback: 1000, fontSize: 13, theme: { background: "#0f1115" } });
    this.term.open(el);
  }

  play() {
    if (this.playing) return;
    if (this.ended()) {
      this.seek(0);
    }
    this.playing = true;
    this.last = performance.now();
    const step = (now: number) => {
      if (!this.playing) return;
      if (!this.pending) {
        this.position = Math.min(this.length, this.position + ((now - this.last) / 1000) * this.speed);
        this.advance();
        this.fetchAhead();
      }
      this.last = now;
      if (this.ended()) {
        this.playing = false;
        this.position = this.length;
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
   * Jumps to `seconds`. A little ahead, by playing the fetched frames between; otherwise
   * from the server's screen at that time (its nearest checkpoint and the output after
   * it) and the window after it, so a jump costs the same anywhere in a recording of any
   * length. Resolves once the screen shows it.
   */
  seek(seconds: number): Promise<void> {
    const target = Math.max(0, Math.min(seconds, this.length));
    const us = Math.round(target * 1e6);
    const token = ++this.seeking;
    const local = !this.pending && target >= this.position && this.fetchedUntil(us) && this.costUntil(us) <= LOCAL_SEEK_CHARS;
    this.position = target;
    if (local) {
      this.advance();
      this.onTick(this.position, this.playing);
      return new Promise((resolve) => this.term.write("", resolve));
    }
    this.pending = true;
    this.onTick(this.position, this.playing);
    return this.jump(us, token).catch((e) => {
      if (token !== this.seeking) return;
      // No screen from the server: play the recording here from its start instead.
      console.warn("seeking through the server's screen failed; replaying:", e);
      return this.replay(token);
    });
  }

  /** Shows the server's screen at `us`, then fetches the window after it. */
  private async jump(us: number, token: number) {
    const screen = await this.screenAt(us);
    if (token !== this.seeking) return;
    this.term.reset();
    this.term.resize(Math.max(2, screen.cols), Math.max(1, screen.rows));
    this.frames = [];
    this.index = 0;
    this.next = screen.offset;
    this.fetching = null;
    this.shown = us;
    await new Promise<void>((resolve) => this.term.write(screen.data, resolve));
    // The window after it is fetched when playback needs it: a slider dragged through
    // many points fetches only their screens.
    if (token === this.seeking) this.pending = false;
  }

  /** Replays the recording from its start up to the position, a window at a time. */
  private async replay(token: number) {
    let w = await this.windowAt(0);
    if (token !== this.seeking) return;
    this.term.reset();
    this.term.resize(w.cols, w.rows);
    this.take(w);
    for (;;) {
      this.advance();
      if (this.index < this.frames.length || this.next === null) break;
      w = await this.windowAt(this.next);
      if (token !== this.seeking) return;
      this.take(w);
    }
    await new Promise<void>((resolve) => this.term.write("", resolve));
    if (token === this.seeking) this.pending = false;
  }

  /** Makes `w`'s frames the fetched ones, to play from its first. */
  private take(w: RecordingWindow) {
    this.frames = w.events;
    this.index = 0;
    this.next = w.next ?? null;
    this.fetching = null;
    this.shown = -1;
  }

  /** Every frame up to `us` is fetched. */
  private fetchedUntil(us: number): boolean {
    return this.next === null || (this.frames.length > 0 && this.frames[this.frames.length - 1].t_us > us);
  }

  /** Output characters between the next frame and `us`: what playing them here costs. */
  private costUntil(us: number): number {
    let sum = 0;
    for (let i = this.index; i < this.frames.length && this.frames[i].t_us <= us; i++) {
      if (this.frames[i].code === "o") sum += this.frames[i].data.length;
    }
    return sum;
  }

  /** Played to the end of the recording, nothing on its way. */
  private ended(): boolean {
    return this.index >= this.frames.length && this.next === null && !this.pending;
  }

  /**
   * Fetches the next window once the frames left to play run low (before they run out,
   * so playback does not stop to wait), and drops the frames played.
   */
  private fetchAhead() {
    if (this.next === null || this.fetching) return;
    const left = this.frames.length - this.index;
    if (left > this.frames.length / 2 && this.index < this.frames.length) return;
    const token = this.seeking;
    const from = this.next;
    if (this.index >= this.frames.length) this.pending = true;
    this.fetching = this.windowAt(from).then(
      (w) => {
        if (token !== this.seeking || this.next !== from) return;
        this.frames = this.frames.slice(this.index).concat(w.events.filter((f) => f.t_us > this.shown));
        this.index = 0;
        this.next = w.next ?? null;
        this.fetching = null;
        this.pending = false;
      },
      (e) => {
        console.warn("fetching the recording failed:", e);
        if (token !== this.seeking) return;
        this.fetching = null;
        this.pending = false;
        this.next = null;
      },
    );
  }

  /** Writes the frames up to the current position. */
  private advance() {
    let out = "";
    const until = Math.round(this.position * 1e6);
    while (this.index < this.frames.length && this.frames[this.index].t_us <= until) {
      const f = this.frames[this.index++];
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
