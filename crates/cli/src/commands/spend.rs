//! `drover spend` and `drover prices`: the workspace's model spend by agent, model and
//! day, its cap, and the price table.

use anyhow::{bail, Result};
use drover_api::{SpendCap, SpendReport, SpendRowView};

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

fn price_rows(list: &[drover_api::PriceView]) -> Vec<Vec<String>> {
    let f = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_else(|| "-".into());
    list.iter()
        .map(|p| {
            let long = match (p.long_context_above, p.long) {
                (Some(a), Some(l)) => format!("above {a}: {}/{}", l[0], l[1]),
                _ => "-".into(),
            };
            vec![
                p.model.clone(),
                format!("{}", p.input),
                format!("{}", p.output),
                f(p.cache_write_5m),
                f(p.cache_write_1h),
                f(p.cache_read),
                long,
            ]
        })
        .collect()
}

/// Runs `drover prices …`.
pub async fn prices(cmd: crate::args::PricesCmd, json: bool) -> Result<()> {
    use crate::args::PricesCmd;
    use drover_api::{PriceView, Prices};
    let client = Client::from_env()?;
    let mut current: Prices = client.get("/api/v1/prices").await?;
    match cmd {
        PricesCmd::List => {}
        PricesCmd::Set { model, input, output, cache_write, cache_write_1h, cache_read } => {
            current.overrides.retain(|p| p.model != model);
            current.overrides.push(PriceView {
                model,
                input,
                output,
                cache_write_5m: cache_write,
                cache_write_1h,
                cache_read,
                long_context_above: None,
                long: None,
            });
            current = client.put("/api/v1/prices", &Prices { overrides: current.overrides, shipped: Vec::new() }).await?;
        }
        PricesCmd::Unset { model } => {
            let before = current.overrides.len();
            current.overrides.retain(|p| p.model != model);
            if current.overrides.len() == before {
                bail!("the workspace has no price of its own for `{model}` (`drover prices list` shows them)");
            }
            current = client.put("/api/v1/prices", &Prices { overrides: current.overrides, shipped: Vec::new() }).await?;
        }
    }
    if json {
        return print_json(&current);
    }
    let headers = ["MODEL", "INPUT", "OUTPUT", "CACHE WRITE", "1H WRITE", "CACHE READ", "LONG CONTEXT"];
    println!("the workspace's own prices (USD per million tokens; they win over the shipped ones)");
    table::print(&headers, &price_rows(&current.overrides));
    println!("\nshipped");
    table::print(&headers, &price_rows(&current.shipped));
    Ok(())
}
