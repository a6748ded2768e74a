//! `drover agent show` and `drover repo show`: an agent's or a repository's page as
//! text: its facts, its runs (live ones first), its tasks and what its runs cost.

use drover_api::{AgentPage, PageSpend, RepoPage, SessionView, TaskView};

use crate::table;

/// Prints an agent's page.
pub fn print_agent(p: &AgentPage) {
    let a = &p.agent;
    println!("agent {}", table::sanitize(&a.name));
    let facts = [
        ("harness", Some(&a.harness)),
        ("model", a.model.as_ref()),
        ("provider", a.provider.as_ref()),
        ("account", a.account.as_ref()),
        ("effort", a.effort.as_ref()),
        ("operator", Some(&a.operator)),
    ];
    for (k, v) in facts {
        if let Some(v) = v {
            println!("  {:<9} {}", format!("{k}:"), table::sanitize(v));
        }
    }
    rest(&p.sessions, p.more_sessions, &p.tasks, &p.spend);
}

/// Prints a repository's page.
pub fn print_repo(p: &RepoPage) {
    let r = &p.repo;
    println!("repository {}", table::sanitize(&r.name));
    println!("  base:     {}", table::sanitize(r.base.as_deref().unwrap_or("(the clone's checked-out branch)")));
    if r.devices.is_empty() {
        println!("  devices:  none (`drover repo add` registers a clone)");
    }
    for (i, (device, path)) in r.devices.iter().enumerate() {
        let label = if i == 0 { "devices:" } else { "" };
        println!("  {label:<9} {}:{}", table::sanitize(device), table::sanitize(path));
    }
    rest(&p.sessions, p.more_sessions, &p.tasks, &p.spend);
}

/// The sessions and tasks tables and the total spend, which both pages share.
fn rest(sessions: &[SessionView], more: bool, tasks: &[TaskView], spend: &PageSpend) {
    println!("\nSessions (live first, then newest):");
    if sessions.is_empty() {
        println!("  none yet");
    } else {
        let rows: Vec<Vec<String>> = sessions
            .iter()
            .map(|s| {
                vec![
                    s.id.to_string(),
                    s.outcome.as_str().to_string(),
                    s.stage.clone().unwrap_or_else(|| "-".into()),
                    s.task.map(|t| t.to_string()).unwrap_or_else(|| "-".into()),
                    table::ago(Some(s.started_at.as_deref().unwrap_or(&s.created_at))),
                    session_cost(s),
                ]
            })
            .collect();
        table::print(&["ID", "OUTCOME", "STAGE", "TASK", "STARTED", "COST"], &rows);
        if more {
            println!("(only the latest {} are shown)", sessions.len());
        }
    }
    println!("\nTasks:");
    if tasks.is_empty() {
        println!("  none yet");
    } else {
        let rows: Vec<Vec<String>> = tasks
            .iter()
            .map(|t| {
                vec![
                    t.id.to_string(),
                    t.status.clone(),
                    t.stage.clone().unwrap_or_else(|| "-".into()),
                    table::clip(&t.turn.label, 60),
                    table::clip(&t.title, 80),
                ]
            })
            .collect();
        table::print(&["ID", "STATUS", "STAGE", "NOW", "TITLE"], &rows);
    }
    println!("\nTotal spend: {}", total(spend));
}

/// A run's cost: dollars, unknown (a model with no price), or `-` before any use.
fn session_cost(s: &SessionView) -> String {
    match &s.spend {
        Some(sp) => sp.total_usd.map(|u| format!("${u:.4}")).unwrap_or_else(|| "unknown".into()),
        None => "-".into(),
    }
}

/// What all the runs cost.
fn total(spend: &PageSpend) -> String {
    match (spend.cost_usd, spend.cost_unknown) {
        (_, true) => "unknown (a run used a model with no price)".into(),
        (Some(u), false) => format!("${u:.2}"),
        (None, false) => "$0.00 (no model use reported)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_says_when_it_is_unknown() {
        assert_eq!(total(&PageSpend { cost_usd: Some(1.5), cost_unknown: false }), "$1.50");
        assert!(total(&PageSpend { cost_usd: None, cost_unknown: true }).starts_with("unknown"));
        assert!(total(&PageSpend::default()).starts_with("$0.00"));
    }
}
