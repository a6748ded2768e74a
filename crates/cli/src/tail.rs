//! `drover session tail`: what a run printed, as plain text; `--follow` keeps reading
//! new output (long-polling by offset) until the session ends.

use anyhow::{Context, Result};
use drover_protocol::api::SessionText;
use drover_term::text::TextRenderer;
use tokio::io::AsyncWriteExt;

use crate::client::{seg, Client};
use crate::table::sanitize;

/// Runs the tail.
pub async fn tail(client: &Client, id: &str, lines: usize, follow: bool, json: bool) -> Result<()> {
    let path = format!("/api/v1/sessions/{}/text?lines={lines}&complete={follow}", seg(id));
    let text: SessionText = client.get(&path).await?;
    let mut out = tokio::io::stdout();
    for l in &text.lines {
        emit(&mut out, l, json).await?;
    }
    out.flush().await?;
    if !follow {
        return Ok(());
    }
    let mut offset = text.offset;
    let mut renderer = TextRenderer::new();
    let mut done = Vec::new();
    loop {
        let resp = client.get_raw(&format!("/api/v1/sessions/{}/output?from={offset}&wait_ms=25000", seg(id))).await?;
        let next: u64 = header(&resp, "x-drover-offset").and_then(|v| v.parse().ok()).unwrap_or(offset);
        let live = header(&resp, "x-drover-outcome").is_some_and(|o| o == "starting" || o == "running");
        let bytes = resp.bytes().await.context("reading output")?;
        renderer.feed(&bytes, &mut done);
        for l in done.drain(..) {
            emit(&mut out, &l, json).await?;
        }
        out.flush().await?;
        offset = next;
        if bytes.is_empty() && !live {
            if let Some(l) = renderer.finish() {
                emit(&mut out, &l, json).await?;
            }
            out.flush().await?;
            return Ok(());
        }
    }
}

/// Writes the raw output stream from offset 0 (following it with `follow`).
pub async fn raw(client: &Client, id: &str, follow: bool) -> Result<()> {
    let mut out = tokio::io::stdout();
    let mut offset = 0u64;
    loop {
        let wait = if follow { 25000 } else { 0 };
        let resp = client.get_raw(&format!("/api/v1/sessions/{}/output?from={offset}&wait_ms={wait}", seg(id))).await?;
        let next: u64 = header(&resp, "x-drover-offset").and_then(|v| v.parse().ok()).unwrap_or(offset);
        let live = header(&resp, "x-drover-outcome").is_some_and(|o| o == "starting" || o == "running");
        let bytes = resp.bytes().await.context("reading output")?;
        out.write_all(&bytes).await?;
        out.flush().await?;
        offset = next;
        if bytes.is_empty() && (!follow || !live) {
            return Ok(());
        }
    }
}

fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

async fn emit(out: &mut tokio::io::Stdout, line: &str, json: bool) -> Result<()> {
    let text = if json { serde_json::to_string(line)? } else { sanitize(line) };
    out.write_all(text.as_bytes()).await?;
    out.write_all(b"\n").await?;
    Ok(())
}
