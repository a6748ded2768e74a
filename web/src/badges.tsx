// Badges: a run's outcome, a sandbox's own state, the green "running now" dot.

import { cap } from "./format";
import { outcomeHelp } from "./outcomes";
import type { Outcome, SandboxOffer, SandboxState } from "./types";

export const STATE_HELP: Record<SandboxState, string> = {
  provision: "The sandbox is being created.",
  ready: "The sandbox is set up; no run has started in it yet.",
  active: "A run is working in the sandbox.",
  completing: "The sandbox is wrapping up after Finish session.",
  done: "The sandbox finished; its work is kept.",
  abandoned: "The sandbox was torn down without merging.",
  stopped: "A session started on a device whose run has ended.",
};


/** What a device does with its runs: sandboxed, or a warning (unsandboxed, or refusing runs). */
export function SandboxBadge({ offer }: { offer: SandboxOffer | null | undefined }) {
  if (!offer) return <span class="badge muted" title="The device's daemon has not said how it runs sessions (an older version)">unknown</span>;
  switch (offer.state) {
    case "sandboxed":
      return (
        <span class="badge ok" title={`Every run is sandboxed: ${offer.mechanism}`}>
          sandboxed
        </span>
      );
    case "unsandboxed":
      return (
        <span class="badge warning" title="Started --unsandboxed: its runs reach everything the device's user can, Drover's credentials included">
          unsandboxed
        </span>
      );
    case "unavailable":
      return (
        <span class="badge warning" title={`It cannot sandbox runs (${offer.reason}), so it refuses them; its owner can start it with --unsandboxed`}>
          refuses runs
        </span>
      );
  }
}

/** The green dot: an agent process is running right now. */
export function LiveDot({ live }: { live: boolean }) {
  return live ? <span class="dot" title="An agent process is running right now" aria-label="running now" /> : null;
}

export function OutcomeBadge({ outcome, prefix }: { outcome: Outcome; prefix?: string }) {
  const live = outcome === "running";
  return (
    <span class={`badge outcome outcome-${outcome}`} title={outcomeHelp(outcome)} data-outcome={outcome}>
      {live && <span class="dot" aria-hidden="true" />}
      {prefix ? `${prefix} ` : ""}
      {prefix ? outcome : cap(outcome)}
    </span>
  );
}

const IDLE_HELP = "The sandbox is still open, but no run is working in it now: its last run ended and the next has not started.";

/** A sandbox's own state. `live` says whether a run works in it now: an Active sandbox
 *  with none reads Idle, so an ended run is never shown beside "Active". */
export function StateBadge({ state, live, prefix }: { state: SandboxState; live: boolean; prefix?: string }) {
  const idle = state === "active" && !live;
  const word = idle ? "idle" : state;
  return (
    <span class={`badge state state-${word}`} title={idle ? IDLE_HELP : STATE_HELP[state]} data-state={word}>
      {prefix ? `${prefix} ${word}` : cap(word)}
    </span>
  );
}

export function TypeBadges({ kind, taskType }: { kind: string; taskType: string | null }) {
  if (kind === "remote") return <span class="badge type" title="A session started on a device, with no task behind it">Remote</span>;
  return (
    <>
      <span class="badge type" title="The task's type">
        {taskType ?? "Task"}
      </span>{" "}
      <span class="badge type" title="A sandbox working on a task, staffed by the workflow">
        Task
      </span>
    </>
  );
}
