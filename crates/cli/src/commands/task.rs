//! `drover task|agent|repo|sandbox …`: tasks and what they run on; inside an agent's run
//! the same commands hand off, comment, block and ask with the run's own credential.

use anyhow::{bail, Context, Result};
use drover_api::{
    AddRepo, AgentPage, AgentView, CreateAgent, CreateTask, NoteView, RepoAdded, RepoPage, RepoView, SandboxList, StageView, TaskDetail,
    TaskView, TextBody, UpdateTask, WorkflowView,
};

use super::{print_as, print_json};
use crate::args::{AgentCmd, RepoCmd, SandboxCmd, TaskCmd, WorkflowArgs, WorkflowCmd};
use crate::client::{seg, Client};
use crate::table;

fn task_id(given: Option<String>) -> Result<String> {
    given
        .or_else(|| std::env::var("DROVER_TASK").ok().filter(|t| !t.is_empty()))
        .context("which task? pass its id (`drover task list` shows them); inside an agent's run $DROVER_TASK names it")
}

/// The stages the command line asks for: None when it names none (the server then
/// uses the workspace's workflow). Options that change stages without naming them
/// start from the workspace's workflow.
async fn workflow(client: &Client, w: WorkflowArgs, prepare_only: bool) -> Result<Option<Vec<StageView>>> {
    if w.stages.is_empty() && w.assign.is_empty() && w.merge_at.is_empty() && !w.no_merge && w.activate.is_empty() && !prepare_only {
        return Ok(None);
    }
    let mut out: Vec<StageView> = if w.stages.is_empty() {
        client.get::<WorkflowView>("/api/v1/workflow").await?.stages
    } else {
        w.stages.into_iter().map(|stage| StageView { stage, assignee: None, merge: None, activate: None }).collect()
    };
    for a in &w.assign {
        let Some((stage, who)) = a.split_once('=') else { bail!("--assign takes STAGE=AGENT (or STAGE=human), not `{a}`") };
        let Some(s) = out.iter_mut().find(|s| s.stage == stage) else {
            bail!("--assign names stage `{stage}`, which is not in the workflow")
        };
        // `human` is kept as such: a task's --agent never fills a stage kept for people.
        s.assignee = Some(who.to_string());
    }
    if w.no_merge || !w.merge_at.is_empty() {
        for m in &w.merge_at {
            if !out.iter().any(|s| &s.stage == m) {
                bail!("--merge-at names stage `{m}`, which is not in the workflow");
            }
        }
        for s in &mut out {
            s.merge = Some(w.merge_at.contains(&s.stage));
        }
    }
    for a in &w.activate {
        let Some(s) = out.iter_mut().find(|s| &s.stage == a) else { bail!("--activate names stage `{a}`, which is not in the workflow") };
        s.activate = Some(true);
    }
    if let (true, Some(first)) = (prepare_only, out.first_mut()) {
        first.activate = Some(true);
    }
    Ok(Some(out))
}

fn stages_line(stages: &[StageView], current: Option<&str>) -> String {
    let stages: Vec<String> = stages
        .iter()
        .map(|s| {
            let here = if current == Some(s.stage.as_str()) { "▶ " } else { "" };
            let merge = if s.merge == Some(true) { ", merges" } else { "" };
            let activate = if s.activate == Some(true) { ", on Activate" } else { "" };
            format!("{here}{} ({}{merge}{activate})", s.stage, s.assignee.as_deref().unwrap_or("unassigned"))
        })
        .collect();
    stages.join(" → ")
}

/// Runs a workflow command.
pub async fn workflow_cmd(cmd: WorkflowCmd, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    let view: WorkflowView = match cmd {
        WorkflowCmd::Show => client.get("/api/v1/workflow").await?,
        WorkflowCmd::Set { workflow: w } => {
            let Some(stages) = workflow(&client, w, false).await? else {
                bail!("name the stages: `drover workflow set --stages plan,code,review,merge,verify`")
            };
            client.put("/api/v1/workflow", &WorkflowView { stages }).await?
        }
    };
    if json {
        return print_json(&view);
    }
    println!("{}", stages_line(&view.stages, None));
    Ok(())
}

fn print_task(t: &TaskView) {
    println!("{}  {} [{}] {}", t.id, table::sanitize(&t.title), t.kind, t.status);
    println!("  repo:     {}{}", t.repo, t.branch.as_deref().map(|b| format!("  branch {b}")).unwrap_or_default());
    println!("  stages:   {}", stages_line(&t.workflow, t.stage.as_deref()));
    if t.turn.kind != "finished" {
        let since = t.queued_at.as_deref().filter(|_| t.turn.kind == "queued").map(|q| format!(" since {}", table::ago(Some(q))));
        println!("  now:      {}{}", table::sanitize(&t.turn.label), since.unwrap_or_default());
    }
    if let Some(s) = t.live_session {
        println!("  live run: {s}");
    }
}

/// Runs a task command.
pub async fn task(cmd: TaskCmd, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    match cmd {
        TaskCmd::Create { repo, title, body, kind, agent, spend_cap, prepare_only, workflow: w } => {
            let workflow = workflow(&client, w, prepare_only).await?;
            let req = CreateTask { kind: Some(kind), title, body, repo, workflow, agent, spend_cap_usd: spend_cap };
            let t: TaskView = client.post("/api/v1/tasks", &req).await?;
            return print_as(json, &t, |t| println!("{}", t.id));
        }
        TaskCmd::List => {
            let tasks: Vec<TaskView> = client.get("/api/v1/tasks").await?;
            return print_as(json, &tasks, |tasks| print_tasks(tasks));
        }
        TaskCmd::Show { id } => {
            let d: TaskDetail = client.get(&format!("/api/v1/tasks/{}", seg(&task_id(id)?))).await?;
            return print_as(json, &d, print_detail);
        }
        TaskCmd::Why { id } => {
            let d: TaskDetail = client.get(&format!("/api/v1/tasks/{}", seg(&task_id(Some(id))?))).await?;
            let why = serde_json::json!({ "task": d.task.id, "why": d.why });
            return print_as(json, &why, |_| println!("{}", table::sanitize(&d.why)));
        }
        TaskCmd::Advance { task, note } => {
            let t: TaskView = client.post(&format!("/api/v1/tasks/{}/advance", seg(&task_id(task)?)), &TextBody { text: note }).await?;
            return print_as(json, &t, |t| match &t.stage {
                Some(s) => println!("handed off; the task moves to its {s} stage"),
                None => println!("handed off; the task is {}", t.status),
            });
        }
        TaskCmd::Comment { text, task } => {
            client.post_ok(&format!("/api/v1/tasks/{}/comments", seg(&task_id(task)?)), &TextBody { text }).await?;
            if !json {
                println!("comment posted");
            }
        }
        TaskCmd::Block { text, task } => {
            let n: NoteView = client.post(&format!("/api/v1/tasks/{}/blockers", seg(&task_id(task)?)), &TextBody { text }).await?;
            return print_as(json, &n, |n| println!("{}", n.id));
        }
        TaskCmd::Unblock { note } => {
            let n: NoteView = client.post(&format!("/api/v1/notes/{}/resolve", seg(&note)), &serde_json::json!({})).await?;
            return print_as(json, &n, |n| println!("blocker {} resolved", n.id));
        }
        TaskCmd::Ask { question, task, timeout } => {
            return ask(&client, question, task, timeout, json).await;
        }
        TaskCmd::Answer { note, text } => {
            let n: NoteView = client.post(&format!("/api/v1/notes/{}/answer", seg(&note)), &TextBody { text }).await?;
            return print_as(json, &n, |n| println!("answered {}", n.id));
        }
        TaskCmd::Set { id, base } => {
            let id = task_id(id)?;
            let t: TaskView = client.patch(&format!("/api/v1/tasks/{}", seg(&id)), &UpdateTask { base: Some(base.clone()) }).await?;
            return print_as(json, &t, |t| {
                println!("task {id} now starts from `{base}`");
                if t.flagged.is_some() && t.status == "open" {
                    println!("it is flagged for a person: `drover task launch {id}` starts a fresh run");
                }
            });
        }
        TaskCmd::Activate { id } => control(&client, &id, "activate", "activated: its run waits for a slot, then starts", json).await?,
        TaskCmd::Launch { id } => control(&client, &id, "launch", "a fresh run is queued for a slot", json).await?,
        TaskCmd::Finish { id } => control(&client, &id, "finish", "the sandbox is completing", json).await?,
        TaskCmd::MarkDone { id } => control(&client, &id, "mark-done", "the sandbox is done (its branch is kept)", json).await?,
        TaskCmd::Abandon { id, task: false } => {
            control(&client, &id, "abandon", "the sandbox is torn down; the task stays open (`drover task launch` starts it afresh)", json)
                .await?
        }
        TaskCmd::Abandon { id, task: true } => {
            control(&client, &id, "abandon?task=true", "the sandbox is torn down; the task is abandoned", json).await?
        }
        TaskCmd::Cancel { id } => control(&client, &id, "cancel", "the task is cancelled", json).await?,
    }
    Ok(())
}

/// Prints the task list, its NOW column clipped to one line.
fn print_tasks(tasks: &[TaskView]) {
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            let now = table::clip(&t.turn.label, 60);
            vec![t.id.to_string(), t.kind.clone(), t.status.clone(), t.stage.clone().unwrap_or("-".into()), now, t.title.clone()]
        })
        .collect();
    table::print(&["ID", "TYPE", "STATUS", "STAGE", "NOW", "TITLE"], &rows);
}

/// Prints `task show`: the task, its runs, hand-off notes, notes and activity.
fn print_detail(d: &TaskDetail) {
    print_task(&d.task);
    println!("  why:      {}", table::sanitize(&d.why));
    println!("\nRuns:");
    for s in &d.sessions {
        println!(
            "  {}  {:<8} {:<10} {}",
            s.id,
            s.stage.as_deref().unwrap_or("-"),
            s.outcome.as_str(),
            table::sanitize(s.reason.as_deref().unwrap_or(""))
        );
    }
    let hand_offs: Vec<_> = d.events.iter().filter(|e| e.kind == "stage_advanced").collect();
    if !hand_offs.is_empty() {
        println!("\nHand-off notes:");
        for e in hand_offs {
            let text = |k: &str| e.detail.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
            println!("  {} stage, by {} {}:", text("stage"), table::sanitize(&e.actor), table::ago(Some(&e.at)));
            for line in text("note").lines() {
                println!("    {}", table::sanitize(line));
            }
        }
    }
    if !d.notes.is_empty() {
        println!("\nBlockers and questions:");
        for n in &d.notes {
            let state = if n.closed_at.is_some() { "closed" } else { "open" };
            let answer = n.answer.as_deref().map(|a| format!(" → {}", table::sanitize(a))).unwrap_or_default();
            println!("  {} {} ({state}): {}{answer}", n.id, n.kind, table::sanitize(&n.text));
        }
    }
    if !d.allow_rules.is_empty() {
        println!("\nAllowed for its runs (kept by Approve always):");
        for rule in &d.allow_rules {
            println!("  {}", table::sanitize(rule));
        }
    }
    println!("\nActivity:");
    for e in &d.events {
        println!("  {}  {} by {}", table::ago(Some(&e.at)), e.label, table::sanitize(&e.actor));
    }
}

/// `task ask`: files the question and waits (in long polls) for a person's answer.
async fn ask(client: &Client, question: String, task: Option<String>, timeout: f64, json: bool) -> Result<()> {
    if !(0.0..=86_400.0).contains(&timeout) {
        bail!("--timeout must be between 0 and 86400 seconds");
    }
    let n: NoteView = client.post(&format!("/api/v1/tasks/{}/questions", seg(&task_id(task)?)), &TextBody { text: question }).await?;
    eprintln!("asked ({}); waiting for a person to answer (`drover task answer {} TEXT`)…", n.id, n.id);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(timeout);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now()).as_secs_f64().min(300.0);
        let n: NoteView = client.get(&format!("/api/v1/notes/{}?wait={left:.1}", seg(&n.id))).await?;
        if n.closed_at.is_some() {
            if json {
                return print_json(&n);
            }
            println!("{}", n.answer.unwrap_or_default());
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            bail!("no answer to {} within {timeout} s (it stays open; ask again or read it later)", n.id);
        }
    }
}

/// One of the Sessions panel's controls: launch, finish, mark done, abandon, cancel.
async fn control(client: &Client, id: &str, action: &str, done: &str, json: bool) -> Result<()> {
    let t: TaskView = client.post(&format!("/api/v1/tasks/{}/{action}", seg(id)), &serde_json::json!({})).await?;
    if json {
        return print_json(&t);
    }
    println!("{}: {done}", t.id);
    Ok(())
}

/// Runs an agent command.
pub async fn agent(cmd: AgentCmd, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    match cmd {
        AgentCmd::Create { name, harness, model, provider, account, effort, template } => {
            client
                .post_ok("/api/v1/agents", &CreateAgent { name: name.clone(), harness, model, provider, account, effort, template })
                .await?;
            if !json {
                println!("agent `{name}` registered; you are its operator");
            }
        }
        AgentCmd::List => {
            let agents: Vec<AgentView> = client.get("/api/v1/agents").await?;
            if json {
                return print_json(&agents);
            }
            let rows: Vec<Vec<String>> = agents
                .iter()
                .map(|a| vec![a.name.clone(), a.harness.clone(), a.model.clone().unwrap_or("-".into()), a.operator.clone()])
                .collect();
            table::print(&["NAME", "HARNESS", "MODEL", "OPERATOR"], &rows);
        }
        AgentCmd::Show { name } => {
            let page: AgentPage = client.get(&format!("/api/v1/agents/{}", seg(&name))).await?;
            if json {
                return print_json(&page);
            }
            super::pages::print_agent(&page);
        }
    }
    Ok(())
}

/// Runs a repository command.
pub async fn repo(cmd: RepoCmd, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    match cmd {
        RepoCmd::Add { name, device, path, base } => {
            let added: RepoAdded =
                client.post("/api/v1/repos", &AddRepo { name: name.clone(), device: device.clone(), path, base }).await?;
            if json {
                return print_json(&added);
            }
            match &added.unchecked_because {
                None => println!("repository `{name}` registered on `{device}` (checked there)"),
                Some(why) => println!("repository `{name}` registered on `{device}`, not checked: {why}; its first run checks it"),
            }
        }
        RepoCmd::List => {
            let repos: Vec<RepoView> = client.get("/api/v1/repos").await?;
            if json {
                return print_json(&repos);
            }
            let rows: Vec<Vec<String>> = repos
                .iter()
                .map(|r| {
                    let devices = r.devices.iter().map(|(d, p)| format!("{d}:{p}")).collect::<Vec<_>>().join(", ");
                    vec![r.name.clone(), r.base.clone().unwrap_or_else(|| "(checked-out branch)".into()), devices]
                })
                .collect();
            table::print(&["NAME", "BASE", "DEVICES"], &rows);
        }
        RepoCmd::Show { name } => {
            let page: RepoPage = client.get(&format!("/api/v1/repos/{}", seg(&name))).await?;
            if json {
                return print_json(&page);
            }
            super::pages::print_repo(&page);
        }
    }
    Ok(())
}

/// Rows `drover sandbox list` prints (the API's largest batch).
const LIST_ROWS: usize = 200;

/// Runs a sandbox command.
pub async fn sandbox(cmd: SandboxCmd, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    let SandboxCmd::List { filter, search } = cmd;
    let mut base = format!("/api/v1/sandboxes?filter={}", seg(&filter));
    if let Some(q) = search {
        base.push_str(&format!("&q={}", seg(&q)));
    }
    // The first LIST_ROWS rows: a short search may take several batches to find them.
    let (mut sandboxes, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let mut path = format!("{base}&limit={}", LIST_ROWS - sandboxes.len());
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", seg(c)));
        }
        let batch: SandboxList = client.get(&path).await?;
        sandboxes.extend(batch.sandboxes);
        match batch.next_cursor {
            Some(next) if sandboxes.len() < LIST_ROWS => cursor = Some(next),
            _ => break,
        }
    }
    let list = SandboxList { sandboxes, next_cursor: None };
    if json {
        return print_json(&list.sandboxes);
    }
    let rows: Vec<Vec<String>> = list
        .sandboxes
        .iter()
        .map(|b| {
            let last = b.last_run.as_ref().map(|r| r.outcome.as_str().to_string()).unwrap_or("-".into());
            vec![b.id.to_string(), b.kind.clone(), b.state.as_str().into(), last, b.device.clone(), b.working_on.clone()]
        })
        .collect();
    table::print(&["SANDBOX", "TYPE", "STATE", "LAST RUN", "DEVICE", "WORKING ON"], &rows);
    Ok(())
}
