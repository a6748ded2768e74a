// A button that asks before it acts: for controls that cannot be undone (Stop, Abandon).
// The question appears in place, with the action repeated on its confirming button and a
// way back; nothing happens until the person confirms.

import { useState } from "preact/hooks";

export function ConfirmButton({
  label,
  question,
  confirm,
  cancel,
  disabled,
  onConfirm,
}: {
  /** The control's label. */
  label: string;
  /** What confirming does, said plainly. */
  question: string;
  /** The confirming button's label. */
  confirm: string;
  /** The way back's label. */
  cancel: string;
  disabled?: boolean;
  onConfirm: () => void;
}) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <button type="button" class="button danger" disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <span class="confirm" role="group" aria-label={question}>
      <span class="confirm-question">{question}</span>
      <button
        type="button"
        class="button danger"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirm}
      </button>
      <button type="button" class="button" autoFocus onClick={() => setAsking(false)}>
        {cancel}
      </button>
    </span>
  );
}
