//! Reading usage costs the device little: CPU time to ingest a large Claude Code
//! transcript incrementally (appended in 1 MB steps, read after each, as a session's
//! transcript grows), against a baseline in the same run that only reads the same bytes
//! and finds the line ends.

use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use drover_core::spend::PriceTable;
use drover_device::usage::{claude, Ledger, Tail};
use serde::Serialize;

/// Figures of the usage run.
#[derive(Debug, Serialize)]
pub struct UsageReport {
    /// Transcript size, MB.
    pub mb: f64,
    /// Responses in it (each written twice, as Claude Code does).
    pub responses: u64,
    /// CPU seconds to read, parse and add up usage (median).
    pub ingest_cpu_s: f64,
    /// CPU seconds to only read the bytes and split lines (median).
    pub baseline_cpu_s: f64,
    /// `ingest_cpu_s / baseline_cpu_s`.
    pub ratio: f64,
}

/// This thread's CPU time so far.
fn cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One step of a transcript: a prompt with a large tool result, then one response
/// written twice (the second copy with the final output count).
fn step(out: &mut Vec<u8>, i: u64, filler: &str) {
    let _ = writeln!(
        out,
        r#"{{"type":"user","uuid":"u{i}","timestamp":"2026-11-30T10:00:00.000Z","message":{{"role":"user","content":[{{"type":"tool_result","content":"{filler}"}}]}}}}"#
    );
    for output in [1, 250 + i % 100] {
        let _ = writeln!(
            out,
            r#"{{"type":"assistant","requestId":"req_{i}","timestamp":"2026-11-30T10:00:01.000Z","isSidechain":false,"message":{{"id":"msg_{i}","model":"claude-sonnet-4-5-20250929","role":"assistant","content":[{{"type":"text","text":"Done."}}],"usage":{{"input_tokens":12,"output_tokens":{output},"cache_creation_input_tokens":500,"cache_read_input_tokens":20000,"cache_creation":{{"ephemeral_5m_input_tokens":500,"ephemeral_1h_input_tokens":0}}}}}}}}"#
        );
    }
}

/// Writes the transcript in 1 MB appends, calling `read` after each; CPU of the reads.
fn ingest(path: &std::path::Path, mb: usize, mut read: impl FnMut() -> Result<()>) -> Result<(Duration, u64)> {
    let filler = "x".repeat(6_000);
    let mut file = std::fs::File::create(path)?;
    let (mut spent, mut i, mut written) = (Duration::ZERO, 0u64, 0usize);
    let mut buf = Vec::with_capacity(1 << 21);
    while written < mb << 20 {
        buf.clear();
        while buf.len() < 1 << 20 {
            step(&mut buf, i, &filler);
            i += 1;
        }
        file.write_all(&buf)?;
        written += buf.len();
        let t0 = cpu();
        read()?;
        spent += cpu() - t0;
    }
    Ok((spent, i))
}

/// Runs the usage benchmark on a `mb` MB transcript, `runs` times each.
pub fn run(mb: usize, runs: usize) -> Result<UsageReport> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("transcript.jsonl");
    let (mut ingest_s, mut base_s, mut responses) = (Vec::new(), Vec::new(), 0);
    for _ in 0..runs.max(1) {
        let mut lines = 0u64;
        let mut tail = Tail::new(&path);
        let (t, _) = ingest(&path, mb, || {
            tail.read(|_| lines += 1)?;
            Ok(())
        })?;
        base_s.push(t.as_secs_f64());
        std::hint::black_box(lines);

        let (mut tail, mut ledger) = (Tail::new(&path), Ledger::new(PriceTable::default()));
        let mut cost = 0;
        let (t, n) = ingest(&path, mb, || {
            tail.read(|l| {
                if let Some(turn) = claude::turn(l) {
                    ledger.record(turn)
                }
            })?;
            cost = ledger.spend().cost.total();
            Ok(())
        })?;
        anyhow::ensure!(ledger.turns() as u64 == n, "counted {} responses of {n}", ledger.turns());
        std::hint::black_box(cost);
        ingest_s.push(t.as_secs_f64());
        responses = n;
    }
    let (ingest_cpu_s, baseline_cpu_s) = (crate::median(&mut ingest_s), crate::median(&mut base_s));
    let r = UsageReport { mb: mb as f64, responses, ingest_cpu_s, baseline_cpu_s, ratio: ingest_cpu_s / baseline_cpu_s };
    println!(
        "usage: {} MB Claude transcript ({} responses), ingested in 1 MB appends: {:.3} s CPU (median of {}); reading the bytes alone {:.3} s; ratio {:.2}×",
        mb, r.responses, r.ingest_cpu_s, runs, r.baseline_cpu_s, r.ratio
    );
    Ok(r)
}
