//! `drover inbox`, `drover approve`, `drover deny`: what waits on a person, from a
//! terminal; and `drover hook claude`, which a Claude Code run calls for each hook event.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::time::Duration;

use anyhow::Result;
use drover_api::{DecideBody, HookDecision, HookReceipt, Inbox, InboxItem};

use super::print_as;
use crate::args::{ApproveArgs, DenyArgs, HookCmd, InboxArgs};
use crate::client::{seg, Client};
use crate::table;

/// How often `inbox --follow` looks for new items.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);
/// Most bytes of a hook event read from stdin.
const MAX_EVENT: u64 = 1 << 20;
/// Seconds each wait for a decision lasts before the hook asks again.
const DECISION_WAIT_SECS: u32 = 50;
/// Failed asks in a row after which the hook gives up (the harness asks then).
const MAX_FAILED_ASKS: u32 = 60;

/// Runs `drover inbox`.
pub async fn inbox(args: InboxArgs, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    let inbox: Inbox = client.get("/api/v1/inbox").await?;
    if !args.follow {
        return print_as(json, &inbox, |i| print_items(&i.items));
    }
    let mut seen: HashSet<String> = inbox.items.iter().map(|i| i.id.clone()).collect();
    print_as(json, &inbox, |i| print_items(&i.items))?;
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let now: Inbox = match client.get("/api/v1/inbox").await {
            Ok(i) => i,
            Err(e) => {
                eprintln!("{e} (still watching)");
                continue;
            }
        };
        let fresh: Vec<InboxItem> = now.items.into_iter().filter(|i| !seen.contains(&i.id)).collect();
        for item in fresh.iter().rev() {
            seen.insert(item.id.clone());
            if json {
                println!("{}", serde_json::to_string(item)?);
            } else {
                print_item(item);
                ring(item);
            }
        }
    }
}

/// Rings the terminal for a new item: BEL, and an OSC 9 notification with its words.
fn ring(item: &InboxItem) {
    let words = table::sanitize(&table::clip(&item.words, 120)).replace(';', ",");
    let mut out = std::io::stdout();
    let _ = write!(out, "\x07\x1b]9;Drover: {words}\x07");
    let _ = out.flush();
}

fn print_items(items: &[InboxItem]) {
    if items.is_empty() {
        println!("nothing waits on a person");
    }
    for item in items {
        print_item(item);
    }
}

/// One item as a few lines: what waits, on which run, and what answers it.
fn print_item(item: &InboxItem) {
    let guess = if item.guess { "  (a guess, not reported by the harness)" } else { "" };
    println!("{}  {}{}", item.id, table::sanitize(&item.words), guess);
    println!("  {}  {}  {}", table::ago(Some(&item.raised_at)), item.session.as_deref().unwrap_or("-"), table::sanitize(&item.title));
    if let Some(subject) = &item.subject {
        println!("  {}", table::sanitize(&table::clip(subject, 400)));
    }
    if let Some(diff) = &item.diff {
        for line in diff.lines().take(20) {
            println!("    {}", table::sanitize(line));
        }
    }
    if item.clipped {
        println!("  (too long to show in full: it can only be denied here, or answered in its terminal)");
    }
    if !item.always_rules.is_empty() {
        println!("  --always keeps: {}", table::sanitize(&item.always_rules.join(", ")));
    }
    println!("  {}", how_to_answer(item));
}

/// The command that answers `item`, as the caller may.
fn how_to_answer(item: &InboxItem) -> String {
    let d = |w: &str| item.decisions.iter().any(|x| x == w);
    let run = item.session.as_deref().unwrap_or("");
    match item.kind.as_str() {
        "question" => format!("drover task answer {} \"…\"", item.id),
        _ if d("approve") || d("deny") => {
            let always = if d("approve_always") { format!(" | drover approve {} --always", item.id) } else { String::new() };
            format!("drover approve {}{always} | drover deny {} --message …", item.id, item.id)
        }
        _ if item.can_drop_in => format!("answer in its terminal: drover session attach {run}"),
        _ => "only its operator, an admin or an owner can answer it".into(),
    }
}

/// Runs `drover approve`.
pub async fn approve(args: ApproveArgs, json: bool) -> Result<()> {
    let decision = if args.always { "approve_always" } else { "approve" };
    decide(&args.id, DecideBody { decision: decision.into(), message: None }, json).await
}

/// Runs `drover deny`.
pub async fn deny(args: DenyArgs, json: bool) -> Result<()> {
    decide(&args.id, DecideBody { decision: "deny".into(), message: args.message }, json).await
}

async fn decide(id: &str, body: DecideBody, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    let item: InboxItem = client.post(&format!("/api/v1/attention/{}/decide", seg(id)), &body).await?;
    print_as(json, &item, |i| println!("{}: {} ({})", i.id, i.decision.as_deref().unwrap_or("decided"), table::sanitize(&i.words)))
}

/// Runs `drover hook …`: whatever goes wrong, the harness is left to ask on its own
/// (nothing printed, exit 0).
pub async fn hook(cmd: HookCmd) {
    match cmd {
        HookCmd::Claude => {
            if let Some(out) = claude_hook().await {
                println!("{out}");
            }
        }
        HookCmd::Codex { event } => codex_hook(&event).await,
    }
}

/// Reports what Codex handed its `notify` program; nothing waits on an answer.
async fn codex_hook(event: &str) {
    let Ok(event) = serde_json::from_str::<serde_json::Value>(event) else { return };
    let Ok(client) = Client::from_env() else { return };
    let _ = client.post::<_, HookReceipt>("/api/v1/hooks/codex", &event).await;
}

/// Reports the hook event on stdin; for a held call, waits for the decision and returns
/// what the hook prints.
async fn claude_hook() -> Option<String> {
    let mut input = String::new();
    std::io::stdin().take(MAX_EVENT).read_to_string(&mut input).ok()?;
    let event: serde_json::Value = serde_json::from_str(&input).ok()?;
    let client = Client::from_env().ok()?;
    let receipt: HookReceipt = client.post("/api/v1/hooks/claude", &event).await.ok()?;
    let path = format!("/api/v1/attention/{}/decision?wait={DECISION_WAIT_SECS}", seg(&receipt.attention?));
    let mut failed = 0;
    loop {
        match client.get::<HookDecision>(&path).await {
            Ok(d) if d.decided => return d.output.map(|o| o.to_string()),
            Ok(d) if d.closed => return None,
            Ok(_) => failed = 0,
            Err(_) if failed < MAX_FAILED_ASKS => {
                failed += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(_) => return None,
        }
    }
}
