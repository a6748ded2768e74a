// Members (seed 001 "Who can drop in"): who is in the workspace and their roles; owners
// invite people (a one-time link), change roles, see and revoke anyone's API tokens and
// remove members (offboarding: their tokens and sign-ins end at once, their history
// stays). Your account: your password and your personal API tokens (`drover login`
// issues them), which you can revoke.

import { useEffect, useState } from "preact/hooks";
import { api, enc, errorText } from "../api";
import { ago, when } from "../format";
import { subscribe } from "../live";
import type { Invite, Me, Member, Token } from "../types";

const ROLES = ["member", "admin", "owner"] as const;
const value = (e: Event) => (e.target as HTMLInputElement | HTMLSelectElement).value;

function InviteForm({ onInvited }: { onInvited: () => void }) {
  const [role, setRole] = useState("member");
  const [invite, setInvite] = useState<Invite | null>(null);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    try {
      setInvite(await api<Invite>("/api/v1/invites", { method: "POST", json: { role } }));
      setError(null);
      onInvited();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form class="panel new-task" aria-label="Invite someone" onSubmit={submit}>
      <div class="send-row">
        <label>
          Role
          <select value={role} onChange={(e) => setRole(value(e))}>
            {ROLES.map((r) => (
              <option value={r}>{r}</option>
            ))}
          </select>
        </label>
        <button class="button primary" type="submit">
          Create invitation link
        </button>
      </div>
      {invite && (
        <label>
          Send this link to the person you invite (it works once, until {when(invite.expires_at)}):
          <input class="search" readOnly data-testid="invite-link" value={`${location.origin}${invite.path}`} onFocus={(e) => (e.target as HTMLInputElement).select()} />
        </label>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}

interface PendingInvite { id: string; role: string; created_by: string; created_at: string; expires_at: string }

function PendingInvites({ version }: { version: number }) {
  const [list, setList] = useState<PendingInvite[]>([]);
  const [error, setError] = useState<string | null>(null);
  const load = () => api<PendingInvite[]>("/api/v1/invites").then(setList, (e) => setError(errorText(e)));
  useEffect(() => {
    load();
  }, [version]);
  const withdraw = async (id: string) => {
    try {
      await api(`/api/v1/invites/${enc(id)}/revoke`, { method: "POST", json: {} });
      load();
    } catch (e) {
      setError(errorText(e));
    }
  };
  if (list.length === 0 && !error) return null;
  return (
    <div class="table-wrap">
      {error && <p class="error">{error}</p>}
      <table class="tasks" aria-label="Pending invitations">
        <thead>
          <tr>
            <th>Invitation</th>
            <th>Role</th>
            <th>Sent by</th>
            <th>Expires</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {list.map((i) => (
            <tr>
              <td data-label="Invitation">
                <code>{i.id}</code>
              </td>
              <td data-label="Role">{i.role}</td>
              <td data-label="Sent by">
                {i.created_by}, {ago(i.created_at)}
              </td>
              <td data-label="Expires">{when(i.expires_at)}</td>
              <td data-label="">
                <button class="button danger" type="button" onClick={() => withdraw(i.id)}>
                  Withdraw
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function MemberRow({ m, owner, me, onChanged }: { m: Member; owner: boolean; me: string | undefined; onChanged: (err: string | null) => void }) {
  const [confirming, setConfirming] = useState(false);
  const [showTokens, setShowTokens] = useState(false);
  const change = async (role: string) => {
    try {
      await api(`/api/v1/members/${enc(m.name)}/role`, { method: "PUT", json: { role } });
      onChanged(null);
    } catch (e) {
      onChanged(errorText(e));
    }
  };
  const remove = async () => {
    try {
      await api(`/api/v1/members/${enc(m.name)}`, { method: "DELETE" });
      setConfirming(false);
      onChanged(null);
    } catch (e) {
      onChanged(errorText(e));
    }
  };
  return (
    <>
    <tr>
      <td data-label="Member">{m.name}</td>
      <td data-label="Role">
        {owner ? (
          <select aria-label={`Role of ${m.name}`} value={m.role} onChange={(e) => change(value(e))}>
            {ROLES.map((r) => (
              <option value={r}>{r}</option>
            ))}
          </select>
        ) : (
          m.role
        )}
      </td>
      <td data-label="Joined" title={when(m.created_at)}>
        {ago(m.created_at)}
      </td>
      <td data-label="Password">{m.has_password ? "set" : "not set"}</td>
      <td data-label="">
        {owner && m.name !== me && (
          <div class="send-row">
            <button class="button" type="button" aria-expanded={showTokens} onClick={() => setShowTokens(!showTokens)}>
              Tokens
            </button>
            {confirming ? (
              <>
                <button class="button danger" type="button" onClick={remove}>
                  Remove {m.name} now
                </button>
                <button class="button" type="button" onClick={() => setConfirming(false)}>
                  Keep
                </button>
              </>
            ) : (
              <button class="button danger" type="button" onClick={() => setConfirming(true)}>
                Remove…
              </button>
            )}
          </div>
        )}
        {confirming && <p class="muted">Their API tokens and browser sign-ins stop working at once and their open terminals close; their sessions and history stay.</p>}
      </td>
    </tr>
    {showTokens && (
      <tr>
        <td colSpan={5}>
          <Tokens path={`/api/v1/members/${enc(m.name)}/tokens`} label={`API tokens of ${m.name}`} />
        </td>
      </tr>
    )}
    </>
  );
}

function PasswordForm({ hasPassword, onDone }: { hasPassword: boolean; onDone: () => void }) {
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [again, setAgain] = useState("");
  const [revokeTokens, setRevokeTokens] = useState(false);
  const [message, setMessage] = useState<{ ok: boolean; text: string } | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (next !== again) {
      setMessage({ ok: false, text: "The two new passwords differ." });
      return;
    }
    try {
      await api("/api/v1/me/password", { method: "PUT", json: { current: hasPassword ? current : null, password: next, revoke_tokens: revokeTokens } });
      setMessage({ ok: true, text: revokeTokens ? "Password set; every API token of yours is revoked." : "Password set." });
      setCurrent("");
      setNext("");
      setAgain("");
      onDone();
    } catch (err) {
      setMessage({ ok: false, text: errorText(err) });
    }
  };
  return (
    <form class="panel new-task" aria-label="Password" onSubmit={submit}>
      {hasPassword && (
        <label>
          Current password
          <input class="search" type="password" autocomplete="current-password" value={current} onInput={(e) => setCurrent(value(e))} />
        </label>
      )}
      <label>
        New password (at least 10 characters)
        <input class="search" type="password" autocomplete="new-password" minLength={10} required value={next} onInput={(e) => setNext(value(e))} />
      </label>
      <label>
        New password again
        <input class="search" type="password" autocomplete="new-password" required value={again} onInput={(e) => setAgain(value(e))} />
      </label>
      <label>
        <input type="checkbox" checked={revokeTokens} onChange={(e) => setRevokeTokens((e.target as HTMLInputElement).checked)} /> Also revoke all my API tokens
        (every <code>drover login</code> signs in again)
      </label>
      <div class="send-row">
        <button class="button primary" type="submit">
          {hasPassword ? "Change password" : "Set password"}
        </button>
      </div>
      {message && (
        <p class={message.ok ? "ok-text" : "error"} role={message.ok ? "status" : "alert"}>
          {message.text}
        </p>
      )}
    </form>
  );
}

function Tokens({ path = "/api/v1/tokens", label = "Your API tokens" }: { path?: string; label?: string }) {
  const [list, setList] = useState<Token[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => api<Token[]>(path).then(setList, (e) => setError(errorText(e)));
  useEffect(() => {
    load();
  }, [path]);
  const revoke = async (id: string) => {
    try {
      await api(`/api/v1/tokens/${enc(id)}/revoke`, { method: "POST", json: {} });
      load();
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <>
      {error && <p class="error">{error}</p>}
      {list && list.length === 0 && (
        <p class="empty">
          No API tokens. <code>drover login</code> issues one for the CLI.
        </p>
      )}
      {list && list.length > 0 && (
        <div class="table-wrap">
          <table class="tasks" aria-label={label}>
            <thead>
              <tr>
                <th>Token</th>
                <th>Label</th>
                <th>Issued</th>
                <th>Last used</th>
                <th>State</th>
              </tr>
            </thead>
            <tbody>
              {list.map((t) => (
                <tr>
                  <td data-label="Token">
                    <code>{t.id}</code>
                  </td>
                  <td data-label="Label">{t.label}</td>
                  <td data-label="Issued">{ago(t.created_at)}</td>
                  <td data-label="Last used">{t.last_used_at ? ago(t.last_used_at) : "never"}</td>
                  <td data-label="State">
                    {t.revoked_at ? (
                      `revoked ${ago(t.revoked_at)}`
                    ) : (
                      <button class="button danger" type="button" onClick={() => revoke(t.id)}>
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

export function MembersPage({ me }: { me: Me | null }) {
  const [members, setMembers] = useState<Member[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [invites, setInvites] = useState(0);
  const load = () => api<Member[]>("/api/v1/members").then(setMembers, (e) => setError(errorText(e)));
  useEffect(() => {
    load();
    // Someone joining or a role changing shows up without a reload.
    return subscribe((m) => {
      if (m.kind === "activity" || m.kind === "resync") load();
    });
  }, []);
  const owner = me?.role === "owner";
  const mine = members?.find((m) => m.name === me?.name);
  return (
    <section class="page">
      <h1>Members</h1>
      <p class="muted">
        Owners and admins can drop in to any session, Mark done and Abandon; a member drops in to sessions of the agents they operate. Only owners invite people
        and change roles.
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div class="table-wrap">
        <table class="tasks" aria-label="Members">
          <thead>
            <tr>
              <th>Member</th>
              <th>Role</th>
              <th>Joined</th>
              <th>Password</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {(members ?? []).map((m) => (
              <MemberRow
                m={m}
                owner={owner}
                me={me?.name}
                onChanged={(err) => {
                  setError(err);
                  load();
                }}
              />
            ))}
          </tbody>
        </table>
      </div>
      {owner && (
        <>
          <h2>Invite someone</h2>
          <InviteForm onInvited={() => setInvites((v) => v + 1)} />
          <PendingInvites version={invites} />
        </>
      )}
      {me && (
        <>
          <h2>Your password</h2>
          <PasswordForm hasPassword={mine?.has_password ?? false} onDone={load} />
          <h2>Your API tokens</h2>
          <Tokens />
        </>
      )}
    </section>
  );
}

/** The form that signs a browser in with a name and password. */
export function SignInForm() {
  const [name, setName] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    try {
      await api("/api/v1/login", { method: "POST", json: { name, password } });
      location.reload();
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form class="panel new-task sign-in" aria-label="Sign in" onSubmit={submit}>
      <label>
        Name
        <input class="search" autocomplete="username" required value={name} onInput={(e) => setName(value(e))} />
      </label>
      <label>
        Password
        <input class="search" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(value(e))} />
      </label>
      <div class="send-row">
        <button class="button primary" type="submit">
          Sign in
        </button>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}

/** `/invite#{code}`: join the workspace with a name and a password. The code rides in
 * the fragment (never sent, so never in a proxy's log) and in request bodies. */
export function InvitePage({ code }: { code: string }) {
  const [role, setRole] = useState<string | null>(null);
  const [invalid, setInvalid] = useState<string | null>(null);
  const [name, setName] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    api<{ role: string }>("/api/v1/invites/lookup", { method: "POST", json: { code } }).then(
      (i) => setRole(i.role),
      (e) => setInvalid(errorText(e)),
    );
  }, [code]);
  const submit = async (e: Event) => {
    e.preventDefault();
    try {
      await api("/api/v1/invites/accept", { method: "POST", json: { code, name, password } });
      location.assign("/sessions");
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <section class="page">
      <h1>Join Drover</h1>
      {invalid && (
        <p class="error" role="alert">
          {invalid}
        </p>
      )}
      {role && (
        <form class="panel new-task" aria-label="Join" onSubmit={submit}>
          <p>
            You are invited as <strong>{role}</strong>. Pick the name you will sign in with and a password.
          </p>
          <label>
            Name (letters, digits, '-', '_', '.')
            <input class="search" autocomplete="username" required maxLength={63} value={name} onInput={(e) => setName(value(e))} />
          </label>
          <label>
            Password (at least 10 characters)
            <input class="search" type="password" autocomplete="new-password" required minLength={10} value={password} onInput={(e) => setPassword(value(e))} />
          </label>
          <div class="send-row">
            <button class="button primary" type="submit">
              Join
            </button>
          </div>
          {error && (
            <p class="error" role="alert">
              {error}
            </p>
          )}
        </form>
      )}
    </section>
  );
}
