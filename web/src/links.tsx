// Links to an agent's and a repository's pages, wherever their names appear.

import { enc } from "./api";

/** An agent's name, linked to its page; "—" when there is none. */
export function AgentLink({ name }: { name: string | null | undefined }) {
  return name ? <a href={`/agents/${enc(name)}`}>{name}</a> : <>—</>;
}

/** A repository's name, linked to its page; "—" when there is none. */
export function RepoLink({ name }: { name: string | null | undefined }) {
  return name ? <a href={`/repos/${enc(name)}`}>{name}</a> : <>—</>;
}
