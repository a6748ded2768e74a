//! Skills (seed 001 "Skills"): folders of instructions the workspace enables; each task
//! run's device installs them where the run's harness looks, and reports which reached it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use drover_api::{PutSkill, SkillView};
use drover_core::permissions::WorkspaceAction;

use super::ApiJson;
use crate::auth::Caller;
use crate::{ApiError, AppState};

/// `GET /api/v1/skills`.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<SkillView>>, ApiError> {
    caller.require(WorkspaceAction::Work)?;
    let rows = state.store.skills(caller.0.workspace()).await?;
    Ok(Json(
        rows.into_iter()
            .map(|s| SkillView {
                bytes: s.files.iter().map(|(_, c)| c.len()).sum(),
                files: s.files.into_iter().map(|(p, _)| p).collect(),
                name: s.name,
                created_by: s.created_by,
                updated_at: s.updated_at,
            })
            .collect(),
    ))
}

/// `PUT /api/v1/skills/{name}` (owners and admins): adds or replaces a skill; runs
/// started from now on get it.
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(req): ApiJson<PutSkill>,
) -> Result<StatusCode, ApiError> {
    let who = caller.require(WorkspaceAction::Administer)?;
    let sizes: Vec<(&str, usize)> = req.files.iter().map(|f| (f.path.as_str(), f.content.len())).collect();
    drover_core::skill::check(&name, &sizes).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    if req.files.iter().any(|f| f.content.contains('\0')) {
        return Err(ApiError::BadRequest("a skill's files are text: no NUL bytes".into()));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = req.files.iter().find(|f| !seen.insert(f.path.as_str())) {
        return Err(ApiError::BadRequest(format!("`{}` is given twice", dup.path)));
    }
    let files: Vec<(String, String)> = req.files.into_iter().map(|f| (f.path, f.content)).collect();
    state.store.put_skill(caller.0.workspace(), &name, &files, &who).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /api/v1/skills/{name}` (owners and admins).
pub async fn remove(State(state): State<AppState>, caller: Caller, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    let who = caller.require(WorkspaceAction::Administer)?;
    if !state.store.remove_skill(caller.0.workspace(), &name, &who).await? {
        return Err(ApiError::NotFound(format!(
            "no skill named `{}`: `drover skill list` shows them",
            name.chars().take(63).collect::<String>()
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}
