//! `drover audit export`: the workspace's events in a time window, as JSON lines.

use std::io::Write;

use anyhow::{Context, Result};

use crate::args::AuditCmd;
use crate::client::{seg, Client};

/// Runs an audit command: streams the export to stdout as it arrives.
pub async fn audit(cmd: AuditCmd) -> Result<()> {
    let client = Client::from_env()?;
    let AuditCmd::Export { since, until } = cmd;
    let mut path = format!("/api/v1/audit/export?since={}", seg(&since));
    if let Some(u) = until {
        path.push_str(&format!("&until={}", seg(&u)));
    }
    let mut resp = client.get_raw(&path).await?;
    let mut out = std::io::stdout().lock();
    while let Some(chunk) = resp.chunk().await.context("reading the export")? {
        out.write_all(&chunk)?;
    }
    out.flush()?;
    Ok(())
}
