// Drover's service worker: shows the server's Web Push notifications and acts on a click
// (Approve decides the held call; anything else opens the page the push names). It
// caches nothing. Built on its own (build.mjs) to /sw.js and typed by tsconfig.sw.json.

/// <reference lib="webworker" />
export {};
declare const self: ServiceWorkerGlobalScope;

/** What a push carries (core::notify::Payload). */
interface Payload {
  title: string;
  body: string;
  url: string;
  tag: string;
  runs: number;
  attention: string | null;
}

/** What a notification keeps for its click. */
interface ClickData {
  url: string;
  attention: string | null;
}

/** A path on this server; anything else becomes the inbox. */
const localPath = (url: unknown) => (typeof url === "string" && url.startsWith("/") && !url.startsWith("//") ? url : "/inbox");

self.addEventListener("push", (event) => {
  let p: Partial<Payload> = {};
  try {
    p = (event.data?.json() ?? {}) as Partial<Payload>;
  } catch {
    p = { body: event.data?.text() ?? "" };
  }
  const data: ClickData = { url: localPath(p.url), attention: typeof p.attention === "string" ? p.attention : null };
  event.waitUntil(
    self.registration.showNotification(p.title || "Drover", {
      body: p.body ?? "",
      tag: p.tag || "drover",
      icon: "/icon.svg",
      data,
      actions: data.attention ? [{ action: "approve", title: "Approve" }] : [],
    } as NotificationOptions),
  );
});

/** Focuses a window of this server on `url`: one already there, else the first one
 * navigated there, else a new one. */
async function open(url: string): Promise<void> {
  const target = new URL(url, self.location.origin).href;
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const there = windows.find((w) => w.url === target);
  if (there) {
    await there.focus().catch(() => {});
    return;
  }
  for (const w of windows) {
    // Only a window this worker controls can be navigated.
    const moved = await w.navigate(target).catch(() => null);
    if (moved) {
      await moved.focus().catch(() => {});
      return;
    }
  }
  await self.clients.openWindow(target);
}

/** A click on `n` (`action` "approve": its Approve button). */
async function click(n: Notification, action: string): Promise<void> {
  const data = (n.data ?? {}) as Partial<ClickData>;
  const url = localPath(data.url);
  n.close();
  if (action === "approve" && data.attention) {
    const resp = await fetch(`/api/v1/attention/${encodeURIComponent(data.attention)}/decide`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ decision: "approve" }),
    }).catch(() => null);
    if (resp?.ok) {
      await self.registration.showNotification("Approved", { body: n.body, tag: n.tag, icon: "/icon.svg", data: { url, attention: null } });
      return;
    }
    // Refused (already decided, signed out, offline): the page shows why.
  }
  await open(url);
}

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(click(event.notification, event.action));
});

// For the browser tests only (a headless browser cannot click a notification): a page of
// this server asks for the click on a shown notification, by its tag. It can do nothing a
// page cannot do itself.
self.addEventListener("message", (event) => {
  const m = event.data as { test_click?: string; action?: string } | null;
  if (typeof m?.test_click !== "string") return;
  event.waitUntil(
    self.registration.getNotifications({ tag: m.test_click }).then((ns) => (ns[0] ? click(ns[0], m.action ?? "") : undefined)),
  );
});
