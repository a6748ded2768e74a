//! Typing with the browser in the loop: keys typed into a session's live terminal in
//! Chromium (Playwright, `web/bench/terminal.mjs`), from each keydown until the echo's
//! WebSocket message reaches the page and until xterm.js has it in its rows; against
//! `drover session attach` typing into the same session (`cat`) in the same run, rounds
//! alternating between them. Chromium runs as shipped, and again with its deferral of
//! networking tasks after input until the next frame turned off, which tells the
//! browser's share of the time from Drover's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::drover::Up;
use crate::latency::{through_attach, Percentiles};
use crate::percentile;

/// A median and a 90th percentile, in milliseconds.
#[derive(Debug, Serialize)]
pub struct Spread {
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
}

impl Spread {
    fn of(v: &mut [f64]) -> Spread {
        Spread { p50_ms: percentile(v, 50.0), p90_ms: percentile(v, 90.0) }
    }
}

/// One browser run: keydown until the echo's message reaches the page, and until the
/// echo is in xterm.js's rows.
#[derive(Debug, Serialize)]
pub struct InThePage {
    /// Keydown until the echo's message reaches the page.
    pub message: Spread,
    /// Keydown until the echo is in xterm.js's rows.
    pub screen: Spread,
}

/// One round: attach, then the browser as shipped, then without its deferral.
#[derive(Debug, Serialize)]
pub struct Round {
    /// Through `drover session attach`.
    pub attach: Percentiles,
    /// Chromium as shipped.
    pub browser: InThePage,
    /// Chromium with `--disable-features=DeferRendererTasksAfterInput`.
    pub undeferred: InThePage,
}

/// The figures of `--only browser`.
#[derive(Debug, Serialize)]
pub struct Browser {
    /// Keys per round and client.
    pub keys: usize,
    /// Milliseconds between keys.
    pub gap_ms: u64,
    /// Each round's figures.
    pub rounds: Vec<Round>,
}

/// What the page script prints.
#[derive(Deserialize)]
struct PageTimes {
    message_ms: Vec<f64>,
    screen_ms: Vec<f64>,
}

/// The web directory, whose dependencies (`npm ci`) the page script needs.
fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web")
}

/// Runs `rounds` rounds of `keys` keys, `gap_ms` apart, through attach and the browser.
pub fn run(exe: &Path, keys: usize, gap_ms: u64, rounds: usize) -> Result<Browser> {
    let web = web_dir();
    if !web.join("node_modules/playwright-core").exists() {
        bail!("the browser bench needs the web dependencies: (cd {} && npm ci)", web.display());
    }
    let up = Up::start(exe)?;
    let id = up.start_session(80, 24, &["cat"])?;
    up.wait_running(&id)?;
    let gap = Duration::from_millis(gap_ms);
    let mut out = Browser { keys, gap_ms, rounds: Vec::new() };
    for _ in 0..rounds.max(1) {
        let attach = through_attach(&up, &id, keys, gap).context("through attach")?;
        let browser = in_the_page(&web, &up, exe, &id, keys, gap_ms, "as-shipped")?;
        let undeferred = in_the_page(&web, &up, exe, &id, keys, gap_ms, "undeferred")?;
        out.rounds.push(Round { attach, browser, undeferred });
    }
    let _ = up.cli(&["session", "stop", &id]);
    report(&out);
    Ok(out)
}

fn in_the_page(web: &Path, up: &Up, exe: &Path, id: &str, keys: usize, gap_ms: u64, mode: &str) -> Result<InThePage> {
    let out = Command::new("node")
        .current_dir(web)
        .args(["bench/terminal.mjs", id, &keys.to_string(), &gap_ms.to_string(), mode])
        .env("DROVER_HOME", up.home.path())
        .env("DROVER_BIN", exe)
        .output()
        .context("running node (is Node.js installed?)")?;
    if !out.status.success() {
        bail!("the page script failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    let mut times: PageTimes = serde_json::from_str(line).with_context(|| format!("the page script printed {line:?}"))?;
    Ok(InThePage { message: Spread::of(&mut times.message_ms), screen: Spread::of(&mut times.screen_ms) })
}

fn median(mut v: Vec<f64>) -> f64 {
    percentile(&mut v, 50.0)
}

fn report(b: &Browser) {
    println!(
        "browser ({} keys to cat per client and round, {} ms apart, {} rounds; medians over rounds):",
        b.keys,
        b.gap_ms,
        b.rounds.len()
    );
    let m = |f: &dyn Fn(&Round) -> f64| median(b.rounds.iter().map(f).collect());
    let spread = |f: &dyn Fn(&Round) -> f64| {
        let v: Vec<f64> = b.rounds.iter().map(f).collect();
        let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
        format!("{lo:.2}–{hi:.2}")
    };
    let attach = m(&|r| r.attach.p50_ms);
    println!("  {:<54} p50 {attach:.2} ms ({})", "drover session attach (echo back out)", spread(&|r| r.attach.p50_ms));
    let page = |name: &str, of: &dyn Fn(&Round) -> &InThePage| {
        let (message, screen) = (m(&|r| of(r).message.p50_ms), m(&|r| of(r).screen.p50_ms));
        println!(
            "  {:<54} p50 {message:.2} ms ({})  p90 {:.2} ms   goal p50 ≤ attach + 2 ms: {}",
            format!("{name}: keydown → echo's message"),
            spread(&|r| of(r).message.p50_ms),
            m(&|r| of(r).message.p90_ms),
            if message <= attach + 2.0 { "met" } else { "not met" }
        );
        println!(
            "  {:<54} p50 {screen:.2} ms ({})  p90 {:.2} ms   goal p50 ≤ 20 ms: {}",
            format!("{name}: keydown → echo in xterm.js's rows"),
            spread(&|r| of(r).screen.p50_ms),
            m(&|r| of(r).screen.p90_ms),
            if screen <= 20.0 { "met" } else { "not met" }
        );
    };
    page("Chromium", &|r| &r.browser);
    page("Chromium undeferred", &|r| &r.undeferred);
}
