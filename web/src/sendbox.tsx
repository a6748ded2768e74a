// The Send box: input for a live session that goes through the audited path (it is
// recorded in the activity feed), used on a session's page and in expanded run rows.

import { useState } from "preact/hooks";
import { api, enc, errorText } from "./api";
import type { InputReceipt } from "./types";

/** The audited Send box: text for the session's program, recorded in the activity
 *  feed, then Enter pressed in its terminal. */
export function SendBox({ id }: { id: string }) {
  const field = `send-text-${id}`;
  const [text, setText] = useState("");
  const [status, setStatus] = useState<{ ok: boolean; message: string; detail?: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const send = async () => {
    if (!text.trim() || busy) return;
    setBusy(true);
    try {
      const r = await api<InputReceipt>(`/api/v1/sessions/${enc(id)}/input`, { method: "POST", json: { text } });
      const at = new Date().toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
      setStatus({ ok: true, message: `Sent at ${at} and recorded in the activity feed.`, detail: `Activity event ${r.event}` });
      setText("");
    } catch (e) {
      setStatus({ ok: false, message: errorText(e) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <form
      class="send-box"
      onSubmit={(e) => {
        e.preventDefault();
        send();
      }}
    >
      <label for={field}>Send input (audited)</label>
      <textarea
        id={field}
        rows={3}
        value={text}
        placeholder="Text for the agent. Enter adds a line; Ctrl+Enter (⌘+Enter) sends, then presses Enter in its terminal."
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            send();
          }
        }}
      />
      <div class="send-row">
        <button type="submit" class="button primary" disabled={busy || !text.trim()}>
          Send input (audited)
        </button>
        {status && (
          <span class={status.ok ? "ok-text" : "error"} role="status" data-testid="send-status" title={status.detail}>
            {status.message}
          </span>
        )}
      </div>
    </form>
  );
}
