//! `drover session show` for people: the session's record as aligned rows, with the same
//! cost and skills the JSON and the web page give.

use drover_api::{SessionView, SpendView};
use drover_protocol::device::SkillReport;

use crate::table;

/// Prints `s` as `Label  value` rows.
pub fn print(s: &SessionView) {
    for (k, v) in rows(s) {
        println!("{k:<11} {}", table::sanitize(&v));
    }
}

fn rows(s: &SessionView) -> Vec<(&'static str, String)> {
    let lost = s.outcome == drover_core::Outcome::Lost;
    let dash = || "-".to_string();
    let mut rows = vec![
        ("Session", s.id.to_string()),
        ("State", format!("{} — {}", s.outcome, s.outcome_explanation)),
        ("Title", s.title.clone()),
        ("Command", drover_core::argv::join(&s.command)),
        ("Device", s.device.clone()),
        ("Directory", s.cwd.clone()),
        ("Sandbox", format!("{} ({})", s.sandbox, s.sandbox_state)),
        ("Started by", s.started_by.clone()),
        ("Started", s.started_at.clone().unwrap_or_else(dash)),
        (if lost { "Lost at" } else { "Ended" }, s.ended_at.clone().unwrap_or_else(dash)),
    ];
    if !lost {
        rows.push(("Duration", s.duration_secs.map(|d| format!("{d:.1}s")).unwrap_or_else(dash)));
    }
    rows.push(("Exit code", s.exit_code.map(|c| c.to_string()).unwrap_or_else(dash)));
    rows.push(("Reason", s.reason.clone().unwrap_or_else(dash)));
    rows.push(("Terminal", format!("{}x{}", s.cols, s.rows)));
    rows.push(("Output", format!("{} bytes", s.output_bytes)));
    rows.push(("Attached", s.attached.to_string()));
    rows.push(("Cost", s.spend.as_ref().map(cost).unwrap_or_else(|| "- (no model use reported)".into())));
    if s.task.is_some() || s.skills.as_ref().is_some_and(|k| !k.is_empty()) {
        match s.skills.as_deref() {
            None | Some([]) => rows.push(("Skills", "none enabled when this session started".into())),
            Some(list) => rows.extend(list.iter().enumerate().map(|(i, k)| (if i == 0 { "Skills" } else { "" }, skill(k)))),
        }
    }
    rows
}

/// Seed 001's Cost row: total = generation + cache reads, turns, cache-hit %, model.
fn cost(sp: &SpendView) -> String {
    let turns = format!("{} turn{}", sp.turns, if sp.turns == 1 { "" } else { "s" });
    let hit = sp.cache_hit_pct.map(|p| format!(" · {p:.0}% cache hit")).unwrap_or_default();
    let model = sp.model.as_ref().map(|m| format!(" · {m}")).unwrap_or_default();
    let total = match sp.total_nano {
        Some(total) => {
            format!("{} (generation {} + cache reads {})", usd_exact(total), usd_exact(sp.generation_nano), usd_exact(sp.cache_read_nano))
        }
        None => "unknown (a model with no price)".into(),
    };
    format!("{total} · {turns}{hit}{model}")
}

/// Nano-dollars as dollars: cents from $1 up, hundredths of a cent below (as the web).
fn usd_exact(nano: u64) -> String {
    let (unit, digits) = if nano >= 1_000_000_000 { (10_000_000, 2) } else { (100_000, 4) };
    let n = (nano + unit / 2) / unit;
    let scale = 10u64.pow(digits);
    format!("${}.{:0width$}", n / scale, n % scale, width = digits as usize)
}

fn skill(k: &SkillReport) -> String {
    let what = match k.outcome.as_str() {
        "installed" => "reached this session",
        "unsupported" => "did not reach it: its harness has no skills folder",
        "failed" => "did not reach it: installing failed",
        other => other,
    };
    format!("{}: {what} ({})", k.name, k.detail)
}

#[cfg(test)]
mod tests {
    use super::usd_exact;

    #[test]
    fn dollars_are_rounded_as_the_web_rounds_them() {
        assert_eq!(usd_exact(33_250_000), "$0.0333");
        assert_eq!(usd_exact(23_350_000), "$0.0234");
        assert_eq!(usd_exact(0), "$0.0000");
        assert_eq!(usd_exact(1_234_567_890), "$1.23");
        assert_eq!(usd_exact(999_999_999), "$1.0000");
    }
}
