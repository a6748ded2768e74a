//! Moving a sandbox through its lifecycle, checked against its state machine under
//! the write lock.

use drover_core::sandbox::{SandboxEvent, SandboxTransitionError};
use drover_core::{SandboxId, SandboxState, WorkspaceId};
use sqlx::Row;

use crate::events::{insert, NewEvent};
use crate::{now, parse_id, Result, Store, StoreError};

impl Store {
    /// Moves a sandbox through its lifecycle (Finish, Mark done, Abandon, its task
    /// ending), checked against the state machine under the write lock. A person's move
    /// (with `actor`) is recorded as an event in the same transaction. Returns the new
    /// state, or why the move is not possible from where it is.
    pub async fn sandbox_event(
        &self,
        sandbox: SandboxId,
        event: SandboxEvent,
        actor: Option<&str>,
    ) -> Result<std::result::Result<SandboxState, SandboxTransitionError>> {
        let mut tx = self.write().await?;
        let r = sqlx::query("SELECT state, workspace_id, task_id, last_session_id FROM sandboxes WHERE id = $1")
            .bind(sandbox.to_string())
            .fetch_one(&mut *tx)
            .await?;
        let state: String = r.get("state");
        let from = SandboxState::parse(&state).ok_or_else(|| StoreError::Corrupt(format!("sandbox state {state}")))?;
        let next = match from.apply(event) {
            Ok(next) => next,
            Err(e) => return Ok(Err(e)),
        };
        sqlx::query("UPDATE sandboxes SET state = $1, updated_at = $2 WHERE id = $3")
            .bind(next.as_str())
            .bind(now())
            .bind(sandbox.to_string())
            .execute(&mut *tx)
            .await?;
        let workspace: WorkspaceId = parse_id(r.get("workspace_id"))?;
        if let (Some(actor), Some(kind)) = (actor, event.audited()) {
            let e = NewEvent {
                workspace,
                session: r.get::<Option<String>, _>("last_session_id").as_deref().map(parse_id).transpose()?,
                task: r.get::<Option<String>, _>("task_id").as_deref().map(parse_id).transpose()?,
                kind,
                actor: actor.into(),
                detail: serde_json::json!({ "sandbox": sandbox.to_string(), "from": from.as_str(), "to": next.as_str() }),
            };
            insert(&mut tx, &e).await?;
        }
        tx.commit().await?;
        self.changed(workspace, None);
        Ok(Ok(next))
    }
}
