//! `drover session …`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use drover_api::{AskReply, EventView, InputReceipt, SendInput, SessionList, SessionView, StartSession};

use super::print_json;
use crate::args::SessionCmd;
use crate::client::{seg, Client};
use crate::table;

/// Runs a session command.
pub async fn run(cmd: SessionCmd, json: bool) -> Result<ExitCode> {
    let client = Client::from_env()?;
    match cmd {
        SessionCmd::Start { device, cwd, title, cols, rows, unconfined, command } => {
            let req = StartSession { device, command, cwd, title, cols, rows, unconfined };
            return start(&client, req, json).await;
        }
        SessionCmd::List { all, limit } => {
            let list: SessionList = client.get(&format!("/api/v1/sessions?all={all}&limit={limit}")).await?;
            if json {
                print_json(&list.sessions)?;
            } else {
                print_list(&list.sessions);
            }
        }
        SessionCmd::Show { id } => {
            let s: SessionView = client.get(&format!("/api/v1/sessions/{}", seg(&id))).await?;
            if json {
                print_json(&s)?;
            } else {
                super::session_show::print(&s);
            }
        }
        SessionCmd::Tail { id, raw: true, follow, .. } => crate::tail::raw(&client, &id, follow).await?,
        SessionCmd::Tail { id, lines, follow, .. } => crate::tail::tail(&client, &id, lines, follow, json).await?,
        SessionCmd::Attach { id, read_only, via_server } => return crate::attach::attach(&client, &id, read_only, via_server).await,
        SessionCmd::Input { id, text } => {
            let body = SendInput { text, timeout_secs: None, still_ms: None };
            let r: InputReceipt = client.post(&format!("/api/v1/sessions/{}/input", seg(&id)), &body).await?;
            if json {
                print_json(&r)?;
            } else {
                println!(
                    "sent to {} (recorded as {}{})",
                    r.session,
                    r.event,
                    if r.bracketed_paste { ", as a bracketed paste" } else { "" }
                );
            }
        }
        SessionCmd::Ask { id, text, timeout, still_ms } => return ask(&client, &id, text, timeout, still_ms, json).await,
        SessionCmd::Stop { id } => {
            let s: SessionView = client.post(&format!("/api/v1/sessions/{}/stop", seg(&id)), &serde_json::json!({})).await?;
            if json {
                print_json(&s)?;
            } else {
                println!("{} {}", s.id, s.outcome);
            }
        }
        SessionCmd::Export { id, output } => {
            let resp = client.get_raw(&format!("/api/v1/sessions/{}/export", seg(&id))).await?;
            let bytes = resp.bytes().await.context("reading the recording")?;
            match output {
                Some(path) => std::fs::write(&path, &bytes).with_context(|| format!("writing {}", path.display()))?,
                None => std::io::stdout().write_all(&bytes)?,
            }
        }
        SessionCmd::Events { id } => {
            let events: Vec<EventView> = client.get(&format!("/api/v1/sessions/{}/events", seg(&id))).await?;
            if json {
                print_json(&events)?;
            } else {
                let rows: Vec<Vec<String>> =
                    events.iter().map(|e| vec![e.at.clone(), e.label.clone(), e.actor.clone(), e.detail.to_string()]).collect();
                table::print(&["AT", "EVENT", "BY", "DETAIL"], &rows);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `session start`: the size defaults to this terminal's; exit 1 when it failed to start.
async fn start(client: &Client, mut req: StartSession, json: bool) -> Result<ExitCode> {
    use std::io::IsTerminal;
    let size = if std::io::stdout().is_terminal() { crossterm::terminal::size().ok() } else { None };
    let (tc, tr) = size.map(|(c, r)| (c as u32, r as u32)).unwrap_or((120, 40));
    req.cols = Some(req.cols.unwrap_or(tc));
    req.rows = Some(req.rows.unwrap_or(tr));
    let s: SessionView = client.post("/api/v1/sessions", &req).await?;
    if json {
        print_json(&s)?;
    } else {
        println!("{}", s.id);
    }
    if s.outcome == drover_core::Outcome::Failed && s.started_at.is_none() {
        eprintln!("error: session {} failed to start: {}", s.id, table::sanitize(s.reason.as_deref().unwrap_or("no reason recorded")));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `session ask`: prints the reply; exit 3 when it had not settled within the timeout.
async fn ask(client: &Client, id: &str, text: String, timeout: f64, still_ms: u64, json: bool) -> Result<ExitCode> {
    let body = SendInput { text, timeout_secs: Some(timeout), still_ms: Some(still_ms) };
    let r: AskReply = client.post(&format!("/api/v1/sessions/{}/ask", seg(id)), &body).await?;
    if json {
        print_json(&r)?;
    } else {
        println!("{}", table::sanitize_lines(&r.reply));
    }
    if !r.settled {
        let why = r.pending.as_deref().unwrap_or("the reply had not settled");
        eprintln!(
            "error: no complete reply within {timeout} s: {}; printed is the reply so far (ask with a longer --timeout, or follow it with `drover session tail {id} --follow`)",
            table::sanitize(why)
        );
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_list(sessions: &[SessionView]) {
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|s| {
            vec![
                s.id.to_string(),
                s.outcome.to_string(),
                s.device.clone(),
                s.title.clone(),
                s.attached.to_string(),
                table::ago(Some(&s.created_at)),
                s.exit_code.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    table::print(&["SESSION", "STATE", "DEVICE", "TITLE", "ATTACHED", "CREATED", "EXIT"], &rows);
}
