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

/// The clause of the list's `filter` on sandboxes `b`.
fn filter_clause(filter: SandboxFilter) -> &'static str {
    match filter {
        SandboxFilter::Live => " AND b.live = 1",
        SandboxFilter::Open => " AND b.state NOT IN ('done', 'abandoned', 'stopped')",
        SandboxFilter::All => "",
    }
}

/// A batch as asked for: the next one starts after its last row when it is full.
fn full_batch(items: Vec<SandboxItem>, limit: i64) -> SandboxBatch {
    let next =
        (items.len() as i64 == limit).then(|| items.last().map(|b| SandboxCursor { created_at: b.created_at.clone(), id: b.id })).flatten();
    SandboxBatch { items, next }
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
    /// A short text (under three characters, which no index serves): the list walked in
    /// order, at most this many rows per batch.
    Short(&'a str, usize),
    /// On its index (trigram or FTS), then sorted.
    Indexed(&'a str),
    /// Among the newest [`WALK_ROWS`] only (a common word finds its batch there).
    Walk(&'a str),
}

/// Sandboxes a search looks through in order before it takes the index.
const WALK_ROWS: usize = 2000;

/// Sandboxes a short search looks through per batch: a batch that finds fewer matches
/// than asked for there ends at the last row looked at, and the next goes on from it, so
/// no batch reads the whole list.
pub const SHORT_SEARCH_ROWS: usize = 20_000;

/// A batch of the sandbox list and where the next one starts.
#[derive(Debug, Clone)]
pub struct SandboxBatch {
    /// The rows, newest first.
    pub items: Vec<SandboxItem>,
    /// Where the next batch starts (None: the list ends here). A short search may end a
    /// batch with fewer rows than asked for, or none, and still go on.
    pub next: Option<SandboxCursor>,
}

impl Store {
    /// A batch of the sandbox list, newest first, after `cursor`.
    pub async fn list_sandboxes(
        &self,
        workspace: WorkspaceId,
        filter: SandboxFilter,
        search: Option<&str>,
        cursor: Option<&SandboxCursor>,
        limit: i64,
    ) -> Result<SandboxBatch> {
        self.list_sandboxes_scanning(workspace, filter, search, cursor, limit, SHORT_SEARCH_ROWS).await
    }

    /// [`Store::list_sandboxes`], a short search looking through at most `scan` rows.
    async fn list_sandboxes_scanning(
        &self,
        workspace: WorkspaceId,
        filter: SandboxFilter,
        search: Option<&str>,
        cursor: Option<&SandboxCursor>,
        limit: i64,
        scan: usize,
    ) -> Result<SandboxBatch> {
        let search = search.map(str::trim).filter(|q| !q.is_empty());
        let how = match search {
            // Three characters or more: the trigram index (or FTS) finds the substring (or
            // the id). A common word matches thousands, which the index path must all
            // sort: the newest WALK_ROWS are looked through first, and only a search
            // that finds less than a batch there takes the index.
            Some(q) if q.chars().count() >= 3 => {
                let first = self.sandbox_batch(workspace, filter, Search::Walk(q), cursor, limit).await?;
                if first.len() as i64 == limit {
                    return Ok(full_batch(first, limit));
                }
                Search::Indexed(q)
            }
            // Shorter ones match so much that walking the list in order finds a batch
            // quickly; one that matches little is looked for `scan` rows at a time.
            Some(q) => {
                let items = self.sandbox_batch(workspace, filter, Search::Short(q, scan), cursor, limit).await?;
                if items.len() as i64 == limit {
                    return Ok(full_batch(items, limit));
                }
                let next = self.sandbox_scan_end(workspace, filter, cursor, scan).await?;
                return Ok(SandboxBatch { items, next });
            }
            None => Search::None,
        };
        let items = self.sandbox_batch(workspace, filter, how, cursor, limit).await?;
        Ok(full_batch(items, limit))
    }

    /// The `scan`th row of the list after `cursor`, where the next batch of a short search
    /// starts (None: no row follows it, the list ends there).
    async fn sandbox_scan_end(
        &self,
        workspace: WorkspaceId,
        filter: SandboxFilter,
        cursor: Option<&SandboxCursor>,
        scan: usize,
    ) -> Result<Option<SandboxCursor>> {
        let mut sql = format!("SELECT b.created_at, b.id FROM sandboxes b WHERE b.workspace_id = $1{}", filter_clause(filter));
        if cursor.is_some() {
            sql.push_str(" AND (b.created_at, b.id) < ($2, $3)");
        }
        sql.push_str(&format!(" ORDER BY b.created_at DESC, b.id DESC LIMIT 2 OFFSET {}", scan.saturating_sub(1)));
        let mut query = sqlx::query_as::<_, (String, String)>(&sql).bind(workspace.to_string());
        if let Some(c) = cursor {
            query = query.bind(c.created_at.clone()).bind(c.id.to_string());
        }
        match query.fetch_all(&self.pool).await?.as_slice() {
            [(created_at, id), _] => Ok(Some(SandboxCursor { created_at: created_at.clone(), id: parse_id(id)? })),
            _ => Ok(None),
        }
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
        let engine = self.engine;
        // On its index, the search's few matches are looked up by row and sorted: the
        // workspace is then only a filter, or SQLite, with no statistics, walks the whole
        // list in order to test each row against them.
        let head = match how {
            Search::Indexed(_) => engine.sandbox_search_head(),
            Search::Walk(_) => engine.sandbox_walk_head(),
            Search::None | Search::Short(..) => "SELECT b.* FROM sandboxes b WHERE b.workspace_id = $1",
        };
        let mut batch = format!("{head}{}", filter_clause(filter));
        // Parameters are numbered as the clauses that use them are added: $1 is the
        // workspace, then whatever applies (PostgreSQL refuses parameters left unused).
        let mut args: Vec<String> = vec![workspace.to_string()];
        let mut arg = |v: String| {
            args.push(v);
            format!("${}", args.len())
        };
        let like = engine.like();
        if let Search::Indexed(q) = how {
            let text = if engine.search_takes_pattern() { like_pattern(q) } else { phrase(q) };
            let (text, id) = (arg(text), arg(q.to_string()));
            batch.push_str(&engine.sandbox_search(&text, &id));
        }
        if let Some(c) = cursor {
            let (at, id) = (arg(c.created_at.clone()), arg(c.id.to_string()));
            batch.push_str(&format!(" AND (b.created_at, b.id) < ({at}, {id})"));
        }
        match how {
            Search::None | Search::Indexed(_) => {}
            Search::Walk(q) => {
                // What the indexed search matches (title, device name, sandbox or session
                // id), among the newest WALK_ROWS.
                let text = if engine.search_takes_pattern() { like_pattern(q) } else { phrase(q) };
                let (text, id) = (arg(text), arg(q.to_string()));
                batch = engine.sandbox_walk(&batch, WALK_ROWS, &text, &id);
            }
            Search::Short(q, scan) => {
                // Among the next `scan` rows only; the caller goes on from the last of them.
                let p = arg(like_pattern(q));
                batch = format!(
                    "SELECT * FROM ({batch} ORDER BY b.created_at DESC, b.id DESC LIMIT {scan}) b
                     WHERE b.title {like} {p} ESCAPE '\\' OR b.device_id IN (SELECT n.id FROM devices n WHERE n.name {like} {p} ESCAPE '\\')"
                );
            }
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
        let live = s.list_sandboxes(ws, SandboxFilter::Live, None, None, 100).await.unwrap().items;
        assert_eq!(live.len(), 5);
        assert!(live.iter().all(|b| b.live && b.state == SandboxState::Active));
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::Open, None, None, 100).await.unwrap().items.len(), 5);
        let all = s.list_sandboxes(ws, SandboxFilter::All, None, None, 100).await.unwrap().items;
        assert_eq!(all.len(), 7);
        let ended = all.iter().find(|b| b.last_run.as_ref().unwrap().id == ids[0]).unwrap();
        assert_eq!((ended.state, ended.live, ended.runs), (SandboxState::Stopped, false, 1));
        assert_eq!(ended.last_run.as_ref().unwrap().outcome, Outcome::Failed);
        // Pages of 3 cover the list exactly once, newest first.
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let page = s.list_sandboxes(ws, SandboxFilter::All, None, cursor.as_ref(), 3).await.unwrap().items;
            if page.is_empty() {
                break;
            }
            let last = page.last().unwrap();
            cursor = Some(SandboxCursor { created_at: last.created_at.clone(), id: last.id });
            seen.extend(page.into_iter().map(|b| b.id));
        }
        assert_eq!(seen, all.iter().map(|b| b.id).collect::<Vec<_>>());
        // Search is literal (wildcards in the query are plain characters) and case-blind.
        let hit = s.list_sandboxes(ws, SandboxFilter::All, Some("100%_D"), None, 100).await.unwrap().items;
        assert_eq!(hit.len(), 1);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("%"), None, 100).await.unwrap().items.len(), 1);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("0%"), None, 100).await.unwrap().items.len(), 1);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("ob \"3"), None, 100).await.unwrap().items.len(), 0);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("OB 3 1"), None, 100).await.unwrap().items.len(), 1);
        // A sandbox renamed is found by its new title only.
        sqlx::query("UPDATE sandboxes SET title = 'renamed thing' WHERE id = $1")
            .bind(all[0].id.to_string())
            .execute(&s.pool)
            .await
            .unwrap();
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("renamed"), None, 100).await.unwrap().items.len(), 1);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("job 6"), None, 100).await.unwrap().items.len(), 0);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("job%3"), None, 100).await.unwrap().items.len(), 0);
        assert_eq!(s.list_sandboxes(ws, SandboxFilter::All, Some("BOX"), None, 100).await.unwrap().items.len(), 7);
        let by_session = s.list_sandboxes(ws, SandboxFilter::All, Some(&ids[4].to_string()), None, 100).await.unwrap().items;
        assert_eq!(by_session.len(), 1);
        // Batches a search finds among the newest sandboxes (PostgreSQL looks there
        // first) are those the index finds: paged by 2, every match once, newest first.
        for q in ["job", "box"] {
            let all: Vec<_> =
                s.list_sandboxes(ws, SandboxFilter::All, Some(q), None, 100).await.unwrap().items.iter().map(|b| b.id).collect();
            assert!(all.len() > 4, "{q}: {all:?}");
            let (mut paged, mut cursor) = (Vec::new(), None);
            loop {
                let page = s.list_sandboxes(ws, SandboxFilter::All, Some(q), cursor.as_ref(), 2).await.unwrap().items;
                paged.extend(page.iter().map(|b| b.id));
                match page.last() {
                    Some(last) if page.len() == 2 => cursor = Some(SandboxCursor { created_at: last.created_at.clone(), id: last.id }),
                    _ => break,
                }
            }
            assert_eq!(paged, all, "{q}");
        }
    }

    #[tokio::test]
    async fn short_searches_go_on_in_bounded_steps() {
        let (s, _d) = store().await;
        let (ws, _) = s.bootstrap("w", "alice").await.unwrap();
        let dev = s.upsert_device(ws, "box", 4).await.unwrap();
        for i in 0..9 {
            let new = NewSession {
                workspace: ws,
                device: dev.id,
                command: vec!["cat".into()],
                cwd: "/".into(),
                title: format!("job {i}{}", if i % 4 == 1 { " qz" } else { "" }),
                cols: 80,
                rows: 24,
                created_by: "alice".into(),
                operator: None,
            };
            s.create_session(&new).await.unwrap();
        }
        let everything = s.list_sandboxes(ws, SandboxFilter::All, None, None, 100).await.unwrap().items;
        let expected: Vec<_> = everything.iter().filter(|b| b.title.ends_with("qz")).map(|b| b.title.clone()).collect();
        assert_eq!(expected, ["job 5 qz", "job 1 qz"]);
        // Three rows looked at per batch: batches of up to 2 matches, some short or empty,
        // each going on from the last row looked at, until the list ends.
        let (mut found, mut cursor, mut batches) = (Vec::new(), None, Vec::new());
        loop {
            let batch = s.list_sandboxes_scanning(ws, SandboxFilter::All, Some("QZ"), cursor.as_ref(), 2, 3).await.unwrap();
            batches.push(batch.items.len());
            found.extend(batch.items.iter().map(|b| b.title.clone()));
            match batch.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(found, expected);
        // Rows 8,7,6 (none), 5,4,3 (one), 2,1,0 (one): the list ends with the third.
        assert_eq!(batches, [0, 1, 1]);
        // No match at all: every batch empty, and the steps end with the list.
        let mut steps = 0;
        let mut cursor = None;
        loop {
            let batch = s.list_sandboxes_scanning(ws, SandboxFilter::All, Some("zz"), cursor.as_ref(), 2, 4).await.unwrap();
            assert!(batch.items.is_empty());
            steps += 1;
            match batch.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(steps, 3, "9 rows, 4 at a time");
        // Exactly a step's worth left: the step that reads it ends the list.
        let batch = s.list_sandboxes_scanning(ws, SandboxFilter::All, Some("zz"), None, 2, 9).await.unwrap();
        assert!(batch.next.is_none());
        // A full batch goes on from its last row, as any batch does.
        let full = s.list_sandboxes_scanning(ws, SandboxFilter::All, Some("jo"), None, 2, 3).await.unwrap();
        assert_eq!(full.items.len(), 2);
        assert_eq!(full.next.map(|c| c.id), Some(full.items[1].id));
    }
}
