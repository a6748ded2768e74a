// Shapes of the JSON the server sends, by the names the pages use: generated from the API
// contract (api.gen.ts, from openapi.json: `npm run gen`), never copied by hand.

import type { components } from "./api.gen";

type S = components["schemas"];

export type Outcome = S["Outcome"];
export type SandboxState = S["SandboxState"];
export type OutcomeGuide = S["OutcomeGuide"];

export type Me = S["MeView"];
export type LastRun = S["LastRunView"];
export type Sandbox = S["SandboxView"];
export type SandboxList = S["SandboxList"];
export type AttentionRow = S["AttentionRow"];
export type Overview = S["Overview"];
/** One thing a run waits on a person for (`GET /api/v1/inbox`, `GET /api/v1/attention/{id}`). */
export type InboxItem = S["InboxItem"];
/** `GET /api/v1/inbox`: what waits on a person, newest first. */
export type Inbox = S["Inbox"];
/** `POST /api/v1/attention/{id}/decide`. */
export type DecideBody = S["DecideBody"];
export type Session = S["SessionView"];
export type Tokens = S["Tokens"];
export type Spend = S["SpendView"];
export type Device = S["DeviceView"];
/** A device's sandbox (core::confinement::Offer). */
export type SandboxOffer = S["SandboxOffer"];
export type ActivityEvent = S["EventView"];
export type InputReceipt = S["InputReceipt"];
/** A JSON text frame of the terminal socket. */
export type ViewerEvent = S["ViewerEvent"];
/** `event: activity` of the live update stream. */
export type StreamUpdate = S["StreamUpdate"];
/** `event: changed` of the live update stream. */
export type StreamChanged = S["StreamChanged"];

export type Stage = S["StageView"];
export type Repo = S["RepoView"];
export type Agent = S["AgentView"];
/** What all of an agent's or a repository's runs cost. */
export type PageSpend = S["PageSpend"];
/** `GET /api/v1/agents/{name}`: runs live first, then newest first. */
export type AgentPage = S["AgentPage"];
/** `GET /api/v1/repos/{name}`: runs live first, then newest first. */
export type RepoPage = S["RepoPage"];
export type Task = S["TaskView"];
/** Whose turn it is on a task (the server decides; the list shows `label`). */
export type Turn = S["TurnView"];
export type Note = S["NoteView"];
/** Which of the Sessions panel's controls you may use. */
export type TaskControls = S["TaskControls"];
export type TaskDetail = S["TaskDetail"];

export type Member = S["MemberView"];
export type Invite = S["InviteView"];
export type Token = S["TokenView"];
