//! `drover doctor`: checks this machine for what would break Drover on it — the server
//! and the way to it ([`server`]), what runs need of the machine ([`machine`]), and the
//! home's disk, modes and writability ([`files`]) — one line each, with the fix for each
//! problem. It exits non-zero when any check fails. The verdicts are
//! `drover_core::doctor`'s; the measuring is here.

mod files;
mod machine;
mod server;

use std::process::ExitCode;

use anyhow::Result;
use drover_core::doctor::{any_failed, Finding, Status};

use crate::args::DoctorArgs;
use crate::commands::print_json;

/// Runs every check and prints the findings (an array of `{check, status, detail, fix}`
/// with `--json`).
pub async fn doctor(args: DoctorArgs, json: bool) -> Result<ExitCode> {
    let home = crate::home::home();
    let mut findings = server::checks(args.server.as_deref(), home.as_deref().ok()).await;
    findings.extend(machine::checks().await);
    findings.extend(files::checks(home.as_deref()));
    if json {
        print_json(&findings)?;
    } else {
        print(&findings);
    }
    Ok(if any_failed(&findings) { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// One line per check, its fix beneath it, and a count at the end.
fn print(findings: &[Finding]) {
    let width = findings.iter().map(|f| f.check.len()).max().unwrap_or(0);
    for f in findings {
        println!("{:<4}  {:<width$}  {}", f.status.as_str(), f.check, f.detail);
        if let Some(fix) = &f.fix {
            println!("{:<4}  {:<width$}  fix: {fix}", "", "");
        }
    }
    let count = |s: Status| findings.iter().filter(|f| f.status == s).count();
    println!(
        "{} checks: {} ok, {} to look at, {} failed, {} skipped",
        findings.len(),
        count(Status::Ok),
        count(Status::Warn),
        count(Status::Fail),
        count(Status::Skip)
    );
}
