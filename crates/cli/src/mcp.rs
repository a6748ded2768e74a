//! `drover mcp`: the agent's own calls as MCP tools over stdio (a harness points at it,
//! e.g. Claude Code's `.mcp.json`), so agents call tools rather than shell commands.
//! It acts with the run's session credential (`DROVER_URL`, `DROVER_TOKEN`,
//! `DROVER_TASK`), exactly like `drover task advance|comment|block|ask`.

use std::sync::Arc;

use anyhow::{Context, Result};
use drover_api::{NoteView, TaskView, TextBody};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;

use crate::client::{seg, Client};

/// How long `ask` waits for a person's answer.
const ASK_WAIT_SECS: f64 = 3600.0;

struct DroverTools {
    client: Client,
    task: String,
}

fn schema(properties: serde_json::Value, required: &[&str]) -> Arc<JsonObject> {
    let v = json!({ "type": "object", "properties": properties, "required": required });
    Arc::new(v.as_object().expect("an object").clone())
}

fn tools() -> Vec<Tool> {
    let text = |d: &str| json!({ "text": { "type": "string", "description": d } });
    vec![
        Tool::new(
            "advance",
            "Hand the current stage of your task off, with a note for whoever works the next stage. Your run then ends (completed).",
            schema(json!({ "note": { "type": "string", "description": "What you did and what is left" } }), &["note"]),
        ),
        Tool::new("comment", "Post a comment on your task.", schema(text("The comment"), &["text"])),
        Tool::new("block", "File a blocker on your task; returns its id.", schema(text("What blocks the work"), &["text"])),
        Tool::new(
            "unblock",
            "Resolve a blocker you filed.",
            schema(json!({ "id": { "type": "string", "description": "The blocker's id" } }), &["id"]),
        ),
        Tool::new("ask", "Ask a person a question and wait for the answer (returned).", schema(text("The question"), &["text"])),
    ]
}

fn arg(args: &Option<JsonObject>, name: &str) -> Result<String, McpError> {
    args.as_ref()
        .and_then(|a| a.get(name))
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| McpError::invalid_params(format!("missing string argument `{name}`"), None))
}

impl DroverTools {
    async fn run(&self, name: &str, args: &Option<JsonObject>) -> Result<String, McpError> {
        let task = seg(&self.task);
        let done = |r: anyhow::Result<String>| -> Result<String, McpError> { r.map_err(|e| McpError::internal_error(e.to_string(), None)) };
        match name {
            "advance" => {
                let note = arg(args, "note")?;
                done(
                    async {
                        let t: TaskView = self.client.post(&format!("/api/v1/tasks/{task}/advance"), &TextBody { text: note }).await?;
                        Ok(match t.stage {
                            Some(s) => format!("handed off; the task moves to its {s} stage"),
                            None => format!("handed off; the task is {}", t.status),
                        })
                    }
                    .await,
                )
            }
            "comment" => {
                let text = arg(args, "text")?;
                done(
                    async {
                        self.client.post_ok(&format!("/api/v1/tasks/{task}/comments"), &TextBody { text }).await?;
                        Ok("comment posted".to_string())
                    }
                    .await,
                )
            }
            "block" => {
                let text = arg(args, "text")?;
                done(
                    async {
                        let n: NoteView = self.client.post(&format!("/api/v1/tasks/{task}/blockers"), &TextBody { text }).await?;
                        Ok(format!("blocker {} filed", n.id))
                    }
                    .await,
                )
            }
            "unblock" => {
                let id = arg(args, "id")?;
                done(
                    async {
                        let n: NoteView = self.client.post(&format!("/api/v1/notes/{}/resolve", seg(&id)), &json!({})).await?;
                        Ok(format!("blocker {} resolved", n.id))
                    }
                    .await,
                )
            }
            "ask" => {
                let text = arg(args, "text")?;
                done(
                    async {
                        let n: NoteView = self.client.post(&format!("/api/v1/tasks/{task}/questions"), &TextBody { text }).await?;
                        let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(ASK_WAIT_SECS);
                        loop {
                            let left = deadline.saturating_duration_since(std::time::Instant::now()).as_secs_f64().min(300.0);
                            let a: NoteView = self.client.get(&format!("/api/v1/notes/{}?wait={left:.1}", seg(&n.id))).await?;
                            if a.closed_at.is_some() {
                                return Ok(a.answer.unwrap_or_default());
                            }
                            anyhow::ensure!(std::time::Instant::now() < deadline, "no answer to {} yet; it stays open", n.id);
                        }
                    }
                    .await,
                )
            }
            other => Err(McpError::invalid_params(format!("no tool named `{other}`"), None)),
        }
    }
}

impl ServerHandler for DroverTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("drover", env!("CARGO_PKG_VERSION")))
            .with_instructions("Tools for the task this run works: hand the stage off, comment, file and resolve blockers, ask a person.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(&self, request: CallToolRequestParams, _context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        if !tools().iter().any(|t| t.name == request.name) {
            return Err(McpError::invalid_params(format!("no tool named `{}`", request.name), None));
        }
        // A failed call is a tool result the agent reads, not a protocol error.
        Ok(match self.run(&request.name, &request.arguments).await {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.message.to_string())]),
        }
        .into())
    }
}

/// Serves the tools on stdin/stdout until the client closes them.
pub async fn serve() -> Result<()> {
    let client = Client::from_env()?;
    let task = std::env::var("DROVER_TASK")
        .ok()
        .filter(|t| !t.is_empty())
        .context("`drover mcp` serves an agent's run: $DROVER_TASK (and $DROVER_TOKEN) are set in the runs Drover starts for a task")?;
    let service = DroverTools { client, task }.serve(rmcp::transport::stdio()).await.context("starting the MCP server")?;
    service.waiting().await.context("serving MCP")?;
    Ok(())
}
