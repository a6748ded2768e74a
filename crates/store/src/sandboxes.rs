//! The sandbox list (seed 001 "The sandbox list"): one row per sandbox with its last run,
//! filtered Live / Open / All, searched, and paged by a keyset cursor so every batch costs
//! the same however far down the list it is.

use drover_core::{DeviceId, Outcome, SandboxId, SandboxState, SessionId, TaskId, WorkspaceId};
use sqlx::Row;

use crate::{parse_id, Result, Store, StoreError};

/// Which sandboxes the list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxFilter {
    /// Only sandboxes with a live run ("Sandboxes running now").
    Live,
    /// Every sandbox not finished yet ("All open sandboxes").
    Open,
    /// Every sandbox ("All sandboxes").
    All,
}

/// Where the next batch starts: the last row of the previous one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxCursor {
    /// Its creation time.
    pub created_at: String,
    /// The last row's id: orders rows created at the same time.
    pub id: SandboxId,
}

/// One row of the sandbox list.
#[derive(Debug, Clone)]
pub struct SandboxItem {
    /// The sandbox.
    pub id: SandboxId,
    /// `remote` (started on a device) or `task`.
    pub kind: String,
    /// Its own lifecycle state.
    pub state: SandboxState,
    /// Its title.
    pub title: String,
    /// The device.
    pub device: DeviceId,
    /// The device's name.
    pub device_name: String,
    /// When it was created.
    pub created_at: String,
    /// Runs it has held.
    pub runs: u32,
    /// Whether a run is live in it now.
    pub live: bool,
    /// Its last run.
    pub last_run: Option<LastRun>,
    /// Its task, for a task sandbox: (type, title, status, current stage).
    pub task: Option<SandboxTask>,
    /// The agent of its last run.
    pub agent: Option<String>,
    /// The name of its repository (task sandboxes).
    pub repo: Option<String>,
    /// What its runs cost (nano-dollars): None when no run reported usage, Some(None)
    /// ("unknown") when a run used a model with no price.
    pub cost: Option<Option<u64>>,
    /// What its task's runs cost, in every sandbox (same rules).
    pub task_cost: Option<Option<u64>>,
}

/// A cost sum from `"runs with usage,nano-dollars,unpriced responses"` (`cost_text!`).
pub(crate) fn cost_sum(text: Option<String>) -> Option<Option<u64>> {
    let text = text?;
    let mut parts = text.split(',').map(|p| p.trim().parse::<i64>());
    let (Some(Ok(runs)), Some(Ok(nano)), Some(Ok(unpriced)), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    (runs > 0).then_some((unpriced == 0).then_some(nano.max(0) as u64))
}

/// The task a sandbox works, as the list shows it.
#[derive(Debug, Clone)]
pub struct SandboxTask {
    /// The task, so rows of one task can be told apart and kept in agreement.
    pub id: TaskId,
    /// The task's type.
    pub kind: String,
    /// Its title.
    pub title: String,
    /// Its status (`open`, `done`, …).
    pub status: String,
    /// Its current stage (None once finished).
    pub stage: Option<String>,
}

/// A sandbox's last run, as the list shows it.
#[derive(Debug, Clone)]
pub struct LastRun {
    /// The run's session: where the row links to.
    pub id: SessionId,
    /// Its outcome.
    pub outcome: Outcome,
    /// Exit code.
    pub exit_code: Option<i32>,
    /// When it started.
    pub started_at: Option<String>,
    /// When it ended.
    pub ended_at: Option<String>,
    /// The member it answers to (who may drop in besides admins).
    pub operator: Option<drover_core::MemberId>,
}

/// Escapes `%`, `_` and `\` so a search is matched literally.
fn like_pattern(q: &str) -> String {
    let mut p = String::with_capacity(q.len() + 2);
    p.push('%');
    for c in q.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// A full-text phrase matching `q` literally (quotes doubled), for the trigram index.
fn phrase(q: &str) -> String {
    format!("\"{}\"", q.replace('"', "\"\""))
}

fn item(r: &sqlx::any::AnyRow) -> Result<SandboxItem> {
    let state: String = r.get("state");
    let last_run = match r.get::<Option<String>, _>("s_id") {
        Some(id) => {
            let outcome: String = r.get("s_outcome");
            Some(LastRun {
                id: parse_id(&id)?,
                outcome: Outcome::parse(&outcome).ok_or_else(|| StoreError::Corrupt(format!("outcome {outcome}")))?,
                exit_code: r.get::<Option<i64>, _>("s_exit_code").map(|c| c as i32),
                started_at: r.get("s_started_at"),
                ended_at: r.get("s_ended_at"),
                operator: r.get::<Option<String>, _>("s_operator").as_deref().map(parse_id).transpose()?,
            })
        }
        None => None,
    };
    Ok(SandboxItem {
        id: parse_id(r.get("id"))?,
        kind: r.get("kind"),
        state: SandboxState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("sandbox state {state}")))?,
        title: r.get("title"),
        device: parse_id(r.get("device_id"))?,
        device_name: r.get("device_name"),
        created_at: r.get("created_at"),
        runs: r.get::<i64, _>("runs") as u32,
        live: r.get::<i64, _>("live") != 0,
        repo: r.get("repo_name"),
        last_run,
        task: match r.get::<Option<String>, _>("t_type") {
            Some(kind) => {
                let status: String = r.get("t_status");
                let workflow: Vec<crate::StageSpec> = serde_json::from_str(&r.get::<String, _>("t_workflow")).unwrap_or_default();
                let stage =
                    (status == "open").then(|| workflow.get(r.get::<i64, _>("t_stage_index") as usize).map(|s| s.stage.clone())).flatten();
                Some(SandboxTask {
                    id: parse_id(r.get("t_id"))?,
                    kind,
                    title: r.get("t_title"),
                    status,
                    stage: stage.or_else(|| r.get("s_stage")),
                })
            }
            None => None,
        },
        agent: r.get("agent_name"),
        cost: cost_sum(r.get("b_cost")),
        task_cost: cost_sum(r.get("t_cost")),
    })
}

/// How a batch of the sandbox list is searched.
#[derive(Debug, Clone, Copy)]
enum Search<'a> {
    /// Not searched.
    None,
    /// A short text (under three characters): the list walked in order.
    Short(&'a str),
    /// On its index (trigram or FTS), then sorted.
    Indexed(&'a str),
    /// Among the newest [`WALK_ROWS`] only (a common word finds its batch there).
    Walk(&'a str),
}

/// Sandboxes a search looks through in order before it takes the index.
const WALK_ROWS: usize = 2000;

impl Store {
    /// A batch of the sandbox list, newest first, after `cursor`.
    pub async fn list_sandboxes(
        &self,
        workspace: WorkspaceId,
        filter: SandboxFilter,
        search: Option<&str>,
        cursor: Option<&SandboxCursor>,
        limit: i64,
    ) -> Result<Vec<SandboxItem>> {
        let search = search.map(str::trim).filter(|q| !q.is_empty());
        let how = match search {
            // Three characters or more: the trigram index (or FTS) finds the substring (or
            // the id). On PostgreSQL a common word matches thousands, which the index
            // path must all sort: the newest WALK_ROWS are looked through first, and only
            // a search that finds less than a batch there takes the index.
            Some(q) if q.chars().count() >= 3 && self.engine.search_takes_pattern() => {
                let first = self.sandbox_batch(workspace, filter, Search::Walk(q), cursor, limit).await?;
                if first.len() as i64 == limit {
                    return Ok(first);
                }
                Search::Indexed(q)
            }
            Some(q) if q.chars().count() >= 3 => Search::Indexed(q),
            // Shorter ones match so much that walking the list in order finds a batch
            // quickly.
            Some(q) => Search::Short(q),
            None => Search::None,
        };
        self.sandbox_batch(workspace, filter, how, cursor, limit).await
    }

    /// One batch of the sandbox list, searched `how`.
    async fn sandbox_batch(
        &self,
        workspace: WorkspaceId,
        filter: SandboxFilter,
        how: Search<'_>,
        cursor: Option<&SandboxCursor>,
        limit: i64,
    ) -> Result<Vec<SandboxItem>> {
        // The batch is chosen from `sandboxes` alone (on its list index) and only its rows
        // are joined to the rest: every join is to at most one row, so the batch is the
        // same, and a planner with stale statistics (a fleet's runs started since the
        // last ANALYZE) cannot join every match before taking the first few.
        let mut batch = String::from("SELECT * FROM sandboxes b WHERE b.workspace_id = $1");
        // Parameters are numbered as the clauses that use them are added: $1 is the
        // workspace, then whatever applies (PostgreSQL refuses parameters left unused).
        let mut args: Vec<String> = vec![workspace.to_string()];
        let mut arg = |v: String| {
            args.push(v);
            format!("${}", args.len())
        };
        match filter {
            SandboxFilter::Live => batch.push_str(" AND b.live = 1"),
            SandboxFilter::Open => batch.push_str(" AND b.state NOT IN ('done', 'abandoned', 'stopped')"),
            SandboxFilter::All => {}
        }
        let like = self.engine.like();
        match how {
            Search::None | Search::Walk(_) => {}
            Search::Indexed(q) => {
                let text = if self.engine.search_takes_pattern() { like_pattern(q) } else { phrase(q) };
                let (text, id) = (arg(text), arg(q.to_string()));
                batch.push_str(&self.engine.sandbox_search(&text, &id));
            }
            Search::Short(q) => {
                let p = arg(like_pattern(q));
                batch.push_str(&format!(
                    " AND (b.title {like} {p} ESCAPE '\\' OR b.device_id IN (SELECT n.id FROM devices n WHERE n.name {like} {p} ESCAPE '\\'))"
                ));
            }
        }
        if let Some(c) = cursor {
            let (at, id) = (arg(c.created_at.clone()), arg(c.id.to_string()));
            batch.push_str(&format!(" AND (b.created_at, b.id) < ({at}, {id})"));
        }
        if let Search::Walk(q) = how {
            // What the indexed search matches (title, device name, sandbox or session id),
            // among the newest WALK_ROWS.
            let (p, id) = (arg(like_pattern(q)), arg(q.to_string()));
            batch = format!(
                "SELECT * FROM ({batch} ORDER BY b.created_at DESC, b.id DESC LIMIT {WALK_ROWS}) b
                 WHERE b.title {like} {p} ESCAPE '\\' OR b.device_id IN (SELECT n.id FROM devices n WHERE n.name {like} {p} ESCAPE '\\')
                    OR b.id = {id} OR b.last_session_id = {id}"
            );
        }
        batch.push_str(&format!(" ORDER BY b.created_at DESC, b.id DESC LIMIT ${}", args.len() + 1));
        let sql = format!(
            concat!(
                "SELECT b.id, b.kind, b.state, b.title, b.device_id, b.created_at, b.runs, b.live, d.name AS device_name,
                        s.id AS s_id, s.operator_id AS s_operator, s.outcome AS s_outcome, s.exit_code AS s_exit_code, s.started_at AS s_started_at, s.ended_at AS s_ended_at,
                        s.stage AS s_stage, a.name AS agent_name, r.name AS repo_name,
                        t.id AS t_id, t.type AS t_type, t.title AS t_title, t.status AS t_status, t.workflow AS t_workflow, t.stage_index AS t_stage_index, ",
                cost_text!("x.sandbox_id = b.id"),
                " AS b_cost, ",
                cost_text!("x.task_id = b.task_id"),
                " AS t_cost
                 FROM ({}) b
                 JOIN devices d ON d.id = b.device_id
                 LEFT JOIN sessions s ON s.id = b.last_session_id
                 LEFT JOIN agents a ON a.id = s.agent_id
                 LEFT JOIN tasks t ON t.id = b.task_id
                 LEFT JOIN repos r ON r.id = b.repo_id
                 ORDER BY b.created_at DESC, b.id DESC"
            ),
            batch
        );
        let mut query = sqlx::query(&sql);
        for a in &args {
            query = query.bind(a.as_str());
        }
        let rows = query.bind(limit).fetch_all(&self.pool).await?;
        rows.iter().map(item).collect()
    }

    /// Sessions running (or starting) now in a workspace: the sidebar badge.
    pub async fn count_live_sessions(&self, workspace: WorkspaceId) -> Result<u32> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sandboxes WHERE workspace_id = $1 AND live = 1")
            .bind(workspace.to_string())
            .fetch_one(&self.pool)
            .await?;
        Ok(n as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::store;
    use crate::{now, NewSession, RunTimes};
    use drover_core::outcome::RunEnd;
    use drover_core::ExitStatus;

    #[test]
    fn phrases_quote_their_quotes() {
        assert_eq!(phrase(r#"say "hi" now"#), r#""say ""hi"" now""#);
    }

    #[test]
    fn like_patterns_match_literally() {
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }

    #[tokio::test]
    async fn filters_search_and_pages_without_gaps_or_repeats() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let dev = s.upsert_device(ws, "box", 4).await.unwrap();
        let mut ids = Vec::new();
        for i in 0..7 {
            let new = NewSession {
                workspace: ws,
                device: dev.id,
                command: vec!["cat".into()],
                cwd: "/".into(),
                title: format!("job {i}{}", if i == 3 { " 100%_done" } else { "" }),
                cols: 80,
                rows: 24,
                created_by: "alice".into(),
                operator: None,
            };
            ids.push(s.create_session(&new).await.unwrap());
        }
        // End two of them.
        let ending = RunEnd::Exited { status: ExitStatus::code(1), stop_requested: false };
        for id in &ids[..2] {
            s.end_session(*id, &ending, RunTimes { started_at: None, ended_at: &now() }, 0, "device box").await.unwrap();
        }
        assert_eq!(s.count_live_sessions(ws).await.unwrap(), 5);
        let live = s.list_sandboxes(ws, SandboxFilter::Live, None, None, 100).await.unwrap();
        assert_eq!(live.len(), 5);
        assert!(live.iter().all(|b| b.live && b.state == SandboxState::Active));
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::Open, None, None, 100).await.unwrap().len(), 5);
        let all = s.list_sandboxes(ws, SandboxFilter::All, None, None, 100).await.unwrap();
        assert_eq!(all.len(), 7);
        let ended = all.iter().find(|b| b.last_run.as_ref().unwrap().id == ids[0]).unwrap();
        assert_eq!((ended.state, ended.live, ended.runs), (SandboxState::Stopped, false, 1));
        assert_eq!(ended.last_run.as_ref().unwrap().outcome, Outcome::Failed);
        // Pages of 3 cover the list exactly once, newest first.
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let page = s.list_sandboxes(ws, SandboxFilter::All, None, cursor.as_ref(), 3).await.unwrap();
            if page.is_empty() {
                break;
            }
            let last = page.last().unwrap();
            cursor = Some(SandboxCursor { created_at: last.created_at.clone(), id: last.id });
            seen.extend(page.into_iter().map(|b| b.id));
        }
        assert_eq!(seen, all.iter().map(|b| b.id).collect::<Vec<_>>());
        // Search is literal (wildcards in the query are plain characters) and case-blind.
        let hit = s.list_sandboxes(ws, SandboxFilter::All, Some("100%_D"), None, 100).await.unwrap();
        assert_eq!(hit.len(), 1);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("%"), None, 100).await.unwrap().len(), 1);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("0%"), None, 100).await.unwrap().len(), 1);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("ob \"3"), None, 100).await.unwrap().len(), 0);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("OB 3 1"), None, 100).await.unwrap().len(), 1);
        // A sandbox renamed is found by its new title only.
        sqlx::query("UPDATE sandboxes SET title = 'renamed thing' WHERE id = $1")
            .bind(all[0].id.to_string())
            .execute(&s.pool)
            .await
            .unwrap();
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("renamed"), None, 100).await.unwrap().len(), 1);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("job 6"), None, 100).await.unwrap().len(), 0);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("job%3"), None, 100).await.unwrap().len(), 0);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("BOX"), None, 100).await.unwrap().len(), 7);
        let by_session = s.list_sandboxes(ws, SandboxFilter::All, Some(&ids[4].to_string()), None, 100).await.unwrap();
        assert_eq!(by_session.len(), 1);
        // Batches a search finds among the newest sandboxes (PostgreSQL looks there
        // first) are those the index finds: paged by 2, every match once, newest first.
        for q in ["job", "box"] {
            let all: Vec<_> = s.list_sandboxes(ws, SandboxFilter::All, Some(q), None, 100).await.unwrap().iter().map(|b| b.id).collect();
            assert!(all.len() > 4, "{q}: {all:?}");
            let (mut paged, mut cursor) = (Vec::new(), None);
            loop {
                let page = s.list_sandboxes(ws, SandboxFilter::All, Some(q), cursor.as_ref(), 2).await.unwrap();
                paged.extend(page.iter().map(|b| b.id));
                match page.last() {
                    Some(last) if page.len() == 2 => cursor = Some(SandboxCursor { created_at: last.created_at.clone(), id: last.id }),
                    _ => break,
                }
            }
            assert_eq!(paged, all, "{q}");
        }
    }
}
