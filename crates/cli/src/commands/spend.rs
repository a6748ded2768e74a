//! `drover spend`: the workspace's model spend by agent, model and day, and its cap.

use anyhow::{bail, Result};
use drover_protocol::api::{SpendCap, SpendReport, SpendRowView};

use super::print_json;
use crate::args::SpendArgs;
use crate::client::Client;
use crate::table;

fn usd(r: &SpendRowView) -> String {
    format!("${:.2}{}", r.usd, if r.unknown { " + unknown" } else { "" })
}

fn print(title: &str, rows: &[SpendRowView]) {
    println!("{title}");
    let rows: Vec<Vec<String>> =
        rows.iter().map(|r| vec![r.key.clone(), usd(r), r.turns.to_string(), r.tokens.to_string(), r.runs.to_string()]).collect();
    table::print(&["", "COST", "TURNS", "TOKENS", "RUNS"], &rows);
}

/// Runs `drover spend`.
pub async fn spend(args: SpendArgs, json: bool) -> Result<()> {
    let client = Client::from_env()?;
    if let Some(cap) = args.cap {
        let usd = match cap.as_str() {
            "none" => None,
            v => match v.trim_start_matches('$').parse::<f64>() {
                Ok(n) if n.is_finite() && n >= 0.0 => Some(n),
                _ => bail!("--cap takes an amount in USD (e.g. 250) or `none`"),
            },
        };
        client.put_ok("/api/v1/spend/cap", &SpendCap { usd }).await?;
    }
    let r: SpendReport = client.get(&format!("/api/v1/spend?days={}", args.days)).await?;
    if json {
        return print_json(&r);
    }
    let cap = r.cap_usd.map(|c| format!(" of a ${c:.2} monthly cap")).unwrap_or_default();
    println!("this month: ${:.2}{cap}   (since {})", r.month_usd, r.since);
    print("\nby agent", &r.by_agent);
    print("\nby model", &r.by_model);
    print("\nby day", &r.by_day);
    Ok(())
}
