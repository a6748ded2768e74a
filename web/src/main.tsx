// Drover's web app: the sidebar, the signed-in check, and the routes.

import "@xterm/xterm/css/xterm.css";
import "./style.css";
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, onSignedOut } from "./api";
import { closeLive, subscribe } from "./live";
import { loadOutcomes } from "./outcomes";
import { installLinkHandler, useLocation } from "./router";
import type { Me, Overview } from "./types";
import { SessionsPage } from "./pages/sessions";
import { SessionPage } from "./pages/session";
import { DevicesPage, DevicePage } from "./pages/devices";
import { ActivityPage } from "./pages/activity";
import { TaskPage, TasksPage } from "./pages/tasks";
import { InboxPage } from "./pages/inbox";
import { WebhooksPage } from "./pages/webhooks";
import { InvitePage, MembersPage, SignInForm } from "./pages/members";
import { SpendPage } from "./pages/spend";
import { AgentPage } from "./pages/agent";
import { RepoPage } from "./pages/repo";
import { LinkSignInPage } from "./pages/signin-link";
import { NotificationsPage } from "./pages/notifications";

function SignedOut({ code }: { code: string }) {
  const expired = code === "auth_expired";
  return (
    <div class="banner bad signed-out" role="alert">
      <strong>{expired ? "Your sign-in has expired." : "You are not signed in."}</strong> Sign in with your name and password, or on the machine running
      Drover run <code>drover ui</code> and open the link it prints.
      <SignInForm />
    </div>
  );
}

function NotFound() {
  return (
    <section class="page">
      <h1>Not found</h1>
      <p>
        There is no page here. Go to <a href="/sessions">Sessions</a>.
      </p>
    </section>
  );
}

/** A sidebar count: what it counts, for its tooltip and its test id. */
interface Badge {
  count: number | null;
  title: string;
  testid: string;
  warning?: boolean;
}

function Sidebar({
  running,
  needsYou,
  waiting,
  me,
  path,
}: {
  running: number | null;
  needsYou: number | null;
  waiting: number | null;
  me: Me | null;
  path: string;
}) {
  const item = (href: string, label: string, badge?: Badge) => (
    <a href={href} class={path.startsWith(href) ? "nav-item current" : "nav-item"} aria-current={path.startsWith(href) ? "page" : undefined}>
      <span>{label}</span>
      {badge && badge.count != null && badge.count > 0 && (
        <span class={badge.warning ? "nav-badge warning" : "nav-badge"} data-testid={badge.testid} title={badge.title}>
          {badge.count}
        </span>
      )}
    </a>
  );
  // On a phone the bar is one row scrolled sideways: keep the current page's link in it.
  const bar = useRef<HTMLElement>(null);
  useEffect(() => {
    const el = bar.current;
    const current = el?.querySelector(".nav-item.current");
    if (!el || !current || el.scrollWidth <= el.clientWidth) return;
    const a = el.getBoundingClientRect();
    const c = current.getBoundingClientRect();
    if (c.left < a.left || c.right > a.right) el.scrollLeft += c.left - a.left - 48;
  }, [path]);
  return (
    <nav class="sidebar" aria-label="Main" ref={bar}>
      <a href="/sessions" class="brand">
        Drover
      </a>
      <div class="nav">
        {item("/sessions", "Sessions", { count: running, title: "Sessions running right now", testid: "running-badge" })}
        {item("/inbox", "Needs you", { count: needsYou, title: "Things runs wait on you for", testid: "needs-you-badge", warning: true })}
        {item("/tasks", "Tasks", { count: waiting, title: "Tasks waiting on a person", testid: "waiting-badge", warning: true })}
        {item("/devices", "Devices")}
        {item("/activity", "Activity")}
        {item("/spend", "Spend")}
        {item("/members", "Members")}
        {me && (me.role === "owner" || me.role === "admin") && item("/webhooks", "Webhooks")}
      </div>
      {me && (
        <div class="me" title={`Signed in as ${me.name} (${me.role})`}>
          {me.name} · {me.role} · <a href="/settings/notifications">Notifications</a> ·{" "}
          <a
            href="#"
            onClick={(e) => {
              e.preventDefault();
              api("/api/v1/logout", { method: "POST", json: {} }).finally(() => location.reload());
            }}
          >
            Sign out
          </a>
        </div>
      )}
    </nav>
  );
}

function route(path: string, me: Me | null) {
  if (path === "/" || path === "/sessions") return <SessionsPage />;
  let m = path.match(/^\/sessions\/([A-Za-z0-9_]+)$/);
  if (m) return <SessionPage id={m[1]} />;
  if (path === "/inbox") return <InboxPage />;
  if (path === "/tasks") return <TasksPage />;
  m = path.match(/^\/tasks\/([A-Za-z0-9_]+)$/);
  if (m) return <TaskPage id={m[1]} />;
  if (path === "/devices") return <DevicesPage />;
  m = path.match(/^\/devices\/([^/]+)$/);
  if (m) return <DevicePage name={decodeURIComponent(m[1])} />;
  m = path.match(/^\/agents\/([^/]+)$/);
  if (m) return <AgentPage name={decodeURIComponent(m[1])} />;
  m = path.match(/^\/repos\/([^/]+)$/);
  if (m) return <RepoPage name={decodeURIComponent(m[1])} />;
  if (path === "/activity") return <ActivityPage />;
  if (path === "/webhooks") return <WebhooksPage />;
  if (path === "/members") return <MembersPage me={me} />;
  if (path === "/spend") return <SpendPage me={me} />;
  if (path === "/settings/notifications") return <NotificationsPage />;
  return <NotFound />;
}

/** The invitation code from the address's fragment, taken out of the address bar. */
function inviteCode(): string {
  const code = window.location.hash.slice(1);
  if (code) {
    sessionStorage.setItem("invite", code);
    history.replaceState(null, "", "/invite");
  }
  return code || sessionStorage.getItem("invite") || "";
}

function App() {
  const loc = useLocation();
  if (loc.pathname === "/invite") return <InvitePage code={inviteCode()} />;
  if (loc.pathname === "/login") return <LinkSignInPage />;
  return <SignedInApp />;
}

function SignedInApp() {
  const loc = useLocation();
  const [me, setMe] = useState<Me | null>(null);
  const [signedOut, setSignedOut] = useState<string | null>(null);
  const [running, setRunning] = useState<number | null>(null);
  const [waiting, setWaiting] = useState<number | null>(null);
  const [needsYou, setNeedsYou] = useState<number | null>(null);

  useEffect(() => onSignedOut((code) => setSignedOut(code)), []);
  useEffect(() => {
    api<Me>("/api/v1/me").then(setMe, () => {});
    const overview = () =>
      api<Overview>("/api/v1/overview").then(
        (o) => {
          setRunning(o.running);
          setWaiting(o.tasks_needing_a_person);
          setNeedsYou(o.needs_you);
        },
        () => {},
      );
    overview();
    // Whose turn a task is, and what runs wait on, change only with their activity (a
    // held call raised or decided, a question asked or answered) or when a run's state
    // changes (its turn moved on, it ended): recount then, at most once a second.
    let timer: number | undefined;
    const recount = () => {
      if (timer === undefined) timer = window.setTimeout(() => ((timer = undefined), overview()), 1000);
    };
    const unsubscribe = subscribe((m) => {
      if (m.kind === "activity" || m.kind === "changed") setRunning(m.running);
      if (m.kind === "activity" && (m.event.task || m.event.kind.startsWith("attention_"))) recount();
      if (m.kind === "changed" && m.session) recount();
      if (m.kind === "resync") overview();
    });
    return () => {
      unsubscribe();
      window.clearTimeout(timer);
    };
  }, []);
  useEffect(() => {
    if (signedOut) closeLive();
  }, [signedOut]);

  return (
    <div class="layout">
      <Sidebar running={running} needsYou={needsYou} waiting={waiting} me={me} path={loc.pathname === "/" ? "/sessions" : loc.pathname} />
      <main class="main">
        {signedOut && <SignedOut code={signedOut} />}
        {route(loc.pathname, me)}
      </main>
    </div>
  );
}

installLinkHandler();
// The service worker shows pushed notifications (sw.ts); it caches nothing.
if ("serviceWorker" in navigator) navigator.serviceWorker.register("/sw.js").catch(() => {});
loadOutcomes().then(() => render(<App />, document.getElementById("app")!));
