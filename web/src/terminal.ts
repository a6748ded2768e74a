// The live terminal: xterm.js on the session's WebSocket, with the connection states
// the page header shows (seed 001 "The live-terminal page").

import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { api, ApiError, enc } from "./api";
import type { Outcome, Session, ViewerEvent } from "./types";
import { outcomeHelp } from "./outcomes";
import { parseMessage } from "./validate";
import { WorkerSocket } from "./worker-socket";

export type Pill =
  | { kind: "connecting" }
  | { kind: "connected" }
  | { kind: "reconnecting"; attempt: number }
  | { kind: "ended"; outcome: Outcome; exitCode: number | null; reason: string | null }
  | { kind: "rejected"; cause: string }
  | { kind: "no-permission"; message: string };

export function pillText(p: Pill): string {
  switch (p.kind) {
    case "connecting":
      return "connecting…";
    case "connected":
      return "connected";
    case "reconnecting":
      return `reconnecting (attempt ${p.attempt})`;
    case "ended":
      return `session ${p.outcome}`;
    case "rejected":
      return `rejected: ${p.cause}`;
    case "no-permission":
      return "no permission";
  }
}

/** The pill's one-line hover explanation. */
export function pillHelp(p: Pill): string {
  switch (p.kind) {
    case "connecting":
      return "Opening the connection to the session's terminal.";
    case "connected":
      return "Live: you see the program's screen as it prints, and what you type goes to it.";
    case "reconnecting":
      return "The connection dropped; retrying with a growing pause. The session itself keeps running.";
    case "ended":
      return outcomeHelp(p.outcome);
    case "rejected":
      return "The server refused the connection; it is not retried. Sign in again or check the link.";
    case "no-permission":
      return "Only workspace owners and admins, and the operator of the session's agent, may open this terminal.";
  }
}

const MAX_BACKOFF_MS = 10_000;

/** Output handed to xterm.js and not yet parsed, at most; the rest waits in the page. */
const IN_FLIGHT_BYTES = 256 * 1024;
/** The most output handed to xterm.js in one write: it parses a write whole before it
 * looks at the clock, so a large message parsed at once would hold the page for as long as
 * it takes (a long task); in pieces, xterm.js yields to the page between them. */
const WRITE_PIECE_BYTES = 16 * 1024;
/** Output waiting in the page beyond that when it drops it and asks for the screen instead:
 * a terminal that parses slower than the program prints (a flood, a slow machine) skips
 * ahead to the program's present rather than lag ever further and take the CPU the
 * program needs. */
const BEHIND_BYTES = 2 * 1024 * 1024;
/** Output the server may send ahead of what the page is done with (drawn or dropped): past
 * it the server holds the output back, and sends a fresh screen once the page has caught
 * up, so a flood costs the page (and the server) only what it can show. */
const WINDOW_BYTES = 256 * 1024;
/** The page tells the server it is done with output in steps of at least this much. */
const CONSUMED_EVERY_BYTES = 64 * 1024;
/** How long the page waits for the re-sync it asked for before it reconnects. */
const RESYNC_WAIT_MS = 5_000;

/** Keys of the on-screen key row, as the terminal would send them. */
export function keySequence(key: "esc" | "tab" | "backtab" | "up" | "down" | "right" | "left", appCursor: boolean): string {
  const arrow = (c: string) => (appCursor ? `\x1bO${c}` : `\x1b[${c}`);
  switch (key) {
    case "esc":
      return "\x1b";
    case "tab":
      return "\t";
    case "backtab":
      return "\x1b[Z";
    case "up":
      return arrow("A");
    case "down":
      return arrow("B");
    case "right":
      return arrow("C");
    case "left":
      return arrow("D");
  }
}

export class LiveTerminal {
  readonly term: Terminal;
  private fit = new FitAddon();
  private ws: WorkerSocket | null = null;
  private attempt = 0;
  private closed = false;
  private timer: number | undefined;
  private resizeObserver: ResizeObserver;
  private encoder = new TextEncoder();
  private sentSize = "";
  /** Output waiting to be handed to xterm.js, and its size. */
  private waiting: Uint8Array[] = [];
  private waitingBytes = 0;
  private inFlight = 0;
  /** Output of this connection the page is done with and has not yet told the server of. */
  private consumedBytes = 0;
  /** Counts connections, so output of an earlier one is not counted against this one. */
  private connection = 0;
  /** Dropping output until the re-sync asked for arrives; reconnecting if it does not. */
  private skipping = false;
  private skipTimer: number | undefined;

  constructor(
    private id: string,
    el: HTMLElement,
    private onPill: (p: Pill) => void,
    private onSession: (s: Session) => void,
  ) {
    this.term = new Terminal({
      cursorBlink: true,
      scrollback: 5000,
      fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, "Liberation Mono", monospace',
      fontSize: 13,
      theme: { background: "#0f1115" },
      // Option-click selects on a Mac, as Shift does elsewhere, past a program's mouse mode.
      macOptionClickForcesSelection: true,
    });
    this.term.loadAddon(this.fit);
    this.term.open(el);
    // Shift (Option on a Mac) + wheel scrolls back through the scrollback even when a
    // full-screen program has captured the mouse; browsers turn Shift+wheel sideways.
    this.term.attachCustomWheelEventHandler((ev) => {
      if (!ev.shiftKey && !ev.altKey) return true;
      const delta = ev.deltaY || ev.deltaX;
      if (delta !== 0) this.term.scrollLines(Math.sign(delta) * 3);
      ev.preventDefault();
      return false;
    });
    this.term.onData((d) => this.send(this.encoder.encode(d)));
    this.term.onBinary((d) => this.send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
    this.resizeObserver = new ResizeObserver(() => this.refit());
    this.resizeObserver.observe(el);
    this.refit();
    this.connect();
  }

  /** Sends keystrokes (not audited). */
  send(bytes: Uint8Array | string) {
    this.ws?.send(typeof bytes === "string" ? this.encoder.encode(bytes) : bytes);
  }

  get appCursor(): boolean {
    return this.term.modes.applicationCursorKeysMode;
  }

  private refit() {
    try {
      this.fit.fit();
    } catch {
      return;
    }
    const size = `${this.term.cols}x${this.term.rows}`;
    if (size !== this.sentSize && this.ws?.open) {
      this.sentSize = size;
      this.ws.send(JSON.stringify({ type: "resize", cols: this.term.cols, rows: this.term.rows }));
    }
  }

  /** Checks the session before (re)connecting: signed in, allowed, still live. */
  private async check(): Promise<boolean> {
    try {
      const s = await api<Session>(`/api/v1/sessions/${enc(this.id)}`);
      this.onSession(s);
      if (!s.can_drop_in) {
        this.finish({ kind: "no-permission", message: "" });
        return false;
      }
      if (!s.live) {
        this.finish({ kind: "ended", outcome: s.outcome, exitCode: s.exit_code, reason: s.reason });
        return false;
      }
      return true;
    } catch (e) {
      if (e instanceof ApiError) {
        if (e.status === 401) this.finish({ kind: "rejected", cause: e.code === "auth_expired" ? "auth expired" : "not signed in" });
        else if (e.status === 403) this.finish({ kind: "no-permission", message: e.message });
        else if (e.status === 404 || e.status === 400) this.finish({ kind: "rejected", cause: "no such session" });
        else return true; // a passing server error: retry
        return false;
      }
      return true;
    }
  }

  private async connect() {
    if (this.closed) return;
    this.onPill(this.attempt === 0 ? { kind: "connecting" } : { kind: "reconnecting", attempt: this.attempt });
    if (!(await this.check()) || this.closed) return;
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const url = `${proto}//${location.host}/api/v1/sessions/${enc(this.id)}/terminal?cols=${this.term.cols}&rows=${this.term.rows}&window=${WINDOW_BYTES}`;
    this.sentSize = `${this.term.cols}x${this.term.rows}`;
    const ws = new WorkerSocket(url);
    this.ws = ws;
    this.connection += 1;
    this.consumedBytes = 0;
    let ended = false;
    ws.onmessage = (data) => {
      if (typeof data !== "string") {
        this.output(data);
        return;
      }
      const ev = parseMessage<ViewerEvent>("ViewerEvent", data);
      if (!ev) return;
      switch (ev.type) {
        case "hello":
          this.attempt = 0;
          // What still waits came over the last connection: the server is not told of it.
          this.waiting = [];
          this.waitingBytes = 0;
          this.resetInOrder();
          this.onPill({ kind: "connected" });
          // The attached count now includes this page.
          api<Session>(`/api/v1/sessions/${enc(this.id)}`).then(this.onSession, () => {});
          break;
        case "resize":
          break;
        case "resync":
          this.resetInOrder();
          break;
        case "ended":
          ended = true;
          this.finish({ kind: "ended", outcome: ev.outcome, exitCode: ev.exit_code, reason: ev.reason });
          break;
        case "error":
          this.output(this.encoder.encode(`\r\n\x1b[33m[drover: ${ev.message.replace(/[\x00-\x1f\x7f]/g, " ")}]\x1b[0m\r\n`));
          break;
      }
    };
    ws.onclose = () => {
      if (this.ws === ws) this.ws = null;
      if (ended || this.closed) return;
      this.attempt += 1;
      const delay = Math.min(MAX_BACKOFF_MS, 250 * 2 ** Math.min(this.attempt, 6));
      this.onPill({ kind: "reconnecting", attempt: this.attempt });
      this.timer = window.setTimeout(() => this.connect(), delay);
    };
  }

  /** Terminal output, handed to xterm.js as it parses (at most IN_FLIGHT_BYTES ahead); past
   * BEHIND_BYTES waiting, dropped and a re-sync asked for (a fresh screen follows). */
  private output(data: Uint8Array) {
    if (this.skipping) {
      this.consumed(data.length);
      return;
    }
    this.waiting.push(data);
    this.waitingBytes += data.length;
    if (this.waitingBytes > BEHIND_BYTES && this.ws?.open) {
      this.consumed(this.waitingBytes);
      this.waiting = [];
      this.waitingBytes = 0;
      this.skipping = true;
      this.ws.send(JSON.stringify({ type: "resync" }));
      const ws = this.ws;
      this.skipTimer = window.setTimeout(() => this.skipping && ws.close(), RESYNC_WAIT_MS);
      return;
    }
    this.feed();
  }

  private feed() {
    while (this.inFlight < IN_FLIGHT_BYTES && this.waiting.length) {
      const waiting = this.waiting[0];
      // A view of the message, not a copy; xterm.js takes a sequence split anywhere.
      const chunk = waiting.length > WRITE_PIECE_BYTES ? waiting.subarray(0, WRITE_PIECE_BYTES) : waiting;
      if (chunk === waiting) this.waiting.shift();
      else this.waiting[0] = waiting.subarray(WRITE_PIECE_BYTES);
      this.waitingBytes -= chunk.length;
      this.inFlight += chunk.length;
      const connection = this.connection;
      this.term.write(chunk, () => {
        this.inFlight -= chunk.length;
        if (connection === this.connection) this.consumed(chunk.length);
        this.feed();
      });
    }
  }

  /** Counts output the page is done with (drawn or dropped), telling the server in steps of
   * CONSUMED_EVERY_BYTES, so it sends no more than WINDOW_BYTES ahead. */
  private consumed(bytes: number) {
    this.consumedBytes += bytes;
    if (this.consumedBytes >= CONSUMED_EVERY_BYTES && this.ws?.open) {
      this.ws.send(JSON.stringify({ type: "consumed", bytes: this.consumedBytes }));
      this.consumedBytes = 0;
    }
  }

  /** A fresh screen follows (a new connection, a re-sync): drops the output still waiting
   * and resets the terminal once xterm.js has parsed what it was already handed. */
  private resetInOrder() {
    this.consumed(this.waitingBytes);
    this.waiting = [];
    this.waitingBytes = 0;
    this.skipping = false;
    window.clearTimeout(this.skipTimer);
    this.term.write(new Uint8Array(0), () => this.term.reset());
  }

  private finish(p: Pill) {
    this.closed = true;
    window.clearTimeout(this.timer);
    window.clearTimeout(this.skipTimer);
    this.ws?.close();
    this.ws = null;
    this.term.options.disableStdin = true;
    this.term.options.cursorBlink = false;
    this.onPill(p);
    if (p.kind === "ended") {
      // The session's record changed: let the page reload it.
      api<Session>(`/api/v1/sessions/${enc(this.id)}`).then(this.onSession, () => {});
    }
  }

  dispose() {
    this.closed = true;
    window.clearTimeout(this.timer);
    window.clearTimeout(this.skipTimer);
    this.resizeObserver.disconnect();
    this.ws?.close();
    this.term.dispose();
  }
}
