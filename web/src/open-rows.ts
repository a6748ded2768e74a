// Which rows of a list are expanded: the lists of sessions, tasks and an agent's or a
// repository's runs each open a row in place.

import { useState } from "preact/hooks";

/** Which of a list's rows are open, by row id, and a toggle for one. */
export function useOpenRows(): [Set<string>, (id: string) => void] {
  const [open, setOpen] = useState<Set<string>>(new Set());
  const toggle = (id: string) =>
    setOpen((o) => {
      const next = new Set(o);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  return [open, toggle];
}
