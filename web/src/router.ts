// A small history-API router: the path is the state; links navigate without a reload.

import { useEffect, useState } from "preact/hooks";

type Listener = () => void;
const listeners = new Set<Listener>();

export function navigate(to: string, replace = false) {
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  for (const f of listeners) f();
  if (!replace) window.scrollTo(0, 0);
}

window.addEventListener("popstate", () => {
  for (const f of listeners) f();
});

/** The current location; re-renders on navigation. */
export function useLocation(): URL {
  const [, tick] = useState(0);
  useEffect(() => {
    const f = () => tick((n) => n + 1);
    listeners.add(f);
    return () => {
      listeners.delete(f);
    };
  }, []);
  return new URL(window.location.href);
}

/** Plain left clicks on same-origin links navigate in place. */
export function installLinkHandler() {
  document.addEventListener("click", (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = (e.target as Element).closest("a");
    if (!a || a.target || a.hasAttribute("download")) return;
    const url = new URL(a.href, window.location.href);
    if (url.origin !== window.location.origin || url.pathname.startsWith("/api/") || url.pathname.startsWith("/login/")) return;
    e.preventDefault();
    navigate(url.pathname + url.search);
  });
}
