//! Typing with the browser in the loop: keys typed into a session's live terminal in
//! Chromium (Playwright, `web/bench/terminal.mjs`), from each keydown until the echo
//! reaches the page's main thread (from the socket's worker) and until xterm.js has it
//! in its rows; against `drover session attach` typing into the same session (`cat`) in
//! the same run, rounds alternating between them. Chromium runs as shipped, and again
//! with its deferral of the page's tasks after input until the next frame turned off,
//! which shows whether any of that deferral is left on the echo's path.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::drover::Up;
use crate::latency::{through_attach, Percentiles, Route};
use crate::percentile;
use crate::quiet::wait_for_quiet;

/// How long each side of the stream waits for a quiet machine before it starts.
const QUIET_WAIT: Duration = Duration::from_secs(20);

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

/// One browser run: keydown until the echo reaches the page's main thread, and until the
/// echo is in xterm.js's rows.
#[derive(Debug, Serialize)]
pub struct InThePage {
    /// Keydown until the echo's message reaches the page.
    pub message: Spread,
    /// Keydown until the echo is in xterm.js's rows.
    pub screen: Spread,
    /// Where the time until the message goes, medians.
    pub parts: Parts<f64>,
}

/// The legs of a key's way from its keydown to the echo's message in the page's main
/// thread (`web/bench/terminal.mjs`): one value each (ms), or every key's.
#[derive(Debug, Serialize, Deserialize)]
pub struct Parts<T> {
    /// The keydown's event time until the page's listener runs: Chromium's input dispatch.
    pub input: T,
    /// Until the page posts the key to the socket's worker: xterm.js and the page.
    pub page: T,
    /// Until the worker sends it: the hop to the worker.
    pub to_worker: T,
    /// Until the echo's message reaches the worker: Chromium's network service both ways,
    /// the server and the session.
    pub round_trip: T,
    /// Until the page's main thread has it: the shared ring.
    pub to_page: T,
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
    /// A large stream with Chromium watching, against the same with no viewer.
    pub stream: Vec<StreamRound>,
}

/// One round of the stream: alone, then watched.
#[derive(Debug, Serialize)]
pub struct StreamRound {
    /// Bytes the program printed.
    pub bytes: u64,
    /// The program's own rate with no viewer (MB/s).
    pub alone_mb_s: f64,
    /// The program's own rate with Chromium watching (MB/s).
    pub watched_mb_s: f64,
    /// From the program's end until its last line was in xterm.js's rows (ms).
    pub final_screen_after_ms: f64,
    /// Whether the rows then ended with the file's last line and the end line.
    pub final_screen_right: bool,
    /// The page's longest task while it watched the stream, from the key that started
    /// it (ms; 0 when none was over 50 ms).
    pub longest_task_ms: f64,
    /// The page's longest task before that, while it loaded and connected (ms; 0 when
    /// none was over 50 ms).
    pub longest_load_task_ms: f64,
    /// How often the page, fallen behind, asked for a re-sync.
    pub resyncs_asked: u32,
    /// Bytes the page took in (drew, or dropped) of those the program printed: the rest
    /// the server held back, sending a fresh screen in their place.
    pub taken_in_bytes: u64,
    /// Whether the machine was quiet before each side started (false when it was still
    /// busy after the wait, and that side started anyway).
    pub started_quiet: bool,
}

/// What the stream page script prints.
#[derive(Deserialize)]
struct Watched {
    seen_at_ms: f64,
    rows: Vec<String>,
    long_tasks_ms: Vec<f64>,
    load_tasks_ms: Vec<f64>,
    resyncs_asked: u32,
    consumed_bytes: u64,
}

/// What the stream's program prints last: `STREAM-DONE <µs> <epoch ms> END`.
const DONE: &str = "STREAM-DONE";

/// What the page script prints.
#[derive(Deserialize)]
struct PageTimes {
    message_ms: Vec<f64>,
    screen_ms: Vec<f64>,
    parts_ms: Parts<Vec<f64>>,
}

/// The web directory, whose dependencies (`npm ci`) the page script needs.
fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web")
}

/// Runs `rounds` rounds of `keys` keys, `gap_ms` apart, through attach and the browser.
pub fn run(exe: &Path, keys: usize, gap_ms: u64, rounds: usize, mb: usize) -> Result<Browser> {
    let web = web_dir();
    if !web.join("node_modules/playwright-core").exists() {
        bail!("the browser bench needs the web dependencies: (cd {} && npm ci)", web.display());
    }
    let up = Up::start(exe)?;
    let id = up.start_session(80, 24, &["cat"])?;
    up.wait_running(&id)?;
    let gap = Duration::from_millis(gap_ms);
    let mut out = Browser { keys, gap_ms, rounds: Vec::new(), stream: Vec::new() };
    for _ in 0..rounds.max(1) {
        let attach = through_attach(&up, &id, keys, gap, Route::Server).context("through attach")?;
        let browser = in_the_page(&web, &up, exe, &id, keys, gap_ms, "as-shipped")?;
        let undeferred = in_the_page(&web, &up, exe, &id, keys, gap_ms, "undeferred")?;
        out.rounds.push(Round { attach, browser, undeferred });
    }
    let _ = up.cli(&["session", "stop", &id]);
    let dir = tempfile::tempdir()?;
    let stream = StreamFile::make(dir.path().join("stream.txt"), mb)?;
    for round in 0..rounds.max(1) {
        // Alone first in even rounds, watched first in odd ones: whatever favours the
        // first or second run of a round (the file in the page cache, the database's
        // growth) falls on both sides.
        out.stream.push(stream_round(&web, &up, exe, &stream, round % 2 == 1)?);
    }
    report(&out);
    Ok(out)
}

/// The file a stream session prints, and what is known of it.
struct StreamFile {
    path: PathBuf,
    /// Its size.
    bytes: u64,
    /// What printing it adds to the session's output: a carriage return before each
    /// newline, as the terminal puts it.
    printed: u64,
    /// Its last line.
    last: String,
}

impl StreamFile {
    /// Writes a file of `mb` MB of lines at `path`.
    fn make(path: PathBuf, mb: usize) -> Result<StreamFile> {
        let bytes = crate::throughput::make_file(&path, mb)?;
        let text = std::fs::read_to_string(&path)?;
        let printed = bytes + text.matches('\n').count() as u64;
        let last = text.lines().last().unwrap_or_default().to_string();
        Ok(StreamFile { path, bytes, printed, last })
    }
}

/// The program of a stream session: waits for a line, prints `file`, says when it ended.
fn stream_program(file: &Path) -> String {
    let quoted = format!("'{}'", file.display().to_string().replace('\'', "'\\''"));
    format!(
        "read go; s=$(date +%s%N); cat {quoted}; e=$(date +%s%N); echo \"{DONE} $(( (e - s) / 1000 )) $(( e / 1000000 )) END\"; sleep 600"
    )
}

/// The µs the program took and the epoch ms it ended at, from its end line.
fn parse_done(text: &str) -> Option<(f64, f64)> {
    let line = text.lines().rev().find(|l| l.contains(DONE) && l.trim_end().ends_with("END"))?;
    let mut words = line[line.find(DONE)?..].split_whitespace().skip(1);
    Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
}

/// The µs the program took with no viewer, started once the machine was quiet, and
/// whether it got quiet. Its end is awaited in the session's count of output stored
/// (`session show`), which costs the server next to nothing, and only then read from its
/// tail: a tail of a session in full flood replays what it printed since its last screen
/// checkpoint, megabytes each time, on the server the program's output goes through.
fn alone_rate_us(up: &Up, program: &str, printed: u64) -> Result<(f64, bool)> {
    let alone = up.start_session(120, 40, &["sh", "-c", program])?;
    up.wait_running(&alone)?;
    let before = up.stored_bytes(&alone)?;
    let quiet = wait_for_quiet(QUIET_WAIT);
    up.cli(&["session", "input", &alone, "go"])?;
    up.wait_stored(&alone, before + printed)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (alone_us, _) = loop {
        if let Some(done) = parse_done(&up.cli(&["session", "tail", &alone, "--lines", "5"])?) {
            break done;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "the stream with no viewer never said it ended");
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = up.cli(&["session", "stop", &alone]);
    Ok((alone_us, quiet))
}

/// One round: the stream alone and with Chromium watching (`watched_first` for the
/// order).
fn stream_round(web: &Path, up: &Up, exe: &Path, stream: &StreamFile, watched_first: bool) -> Result<StreamRound> {
    let program = stream_program(&stream.path);
    let mut alone_us = None;
    if !watched_first {
        alone_us = Some(alone_rate_us(up, &program, stream.printed)?);
    }
    let watched = up.start_session(120, 40, &["sh", "-c", &program])?;
    up.wait_running(&watched)?;
    let page = stream_page(web, up, exe, &watched);
    let _ = up.cli(&["session", "stop", &watched]);
    let (page, watched_quiet): (Watched, bool) = page?;
    let (alone_us, alone_quiet) = match alone_us {
        Some(alone) => alone,
        None => alone_rate_us(up, &program, stream.printed)?,
    };
    let (watched_us, end_ms) = parse_done(&page.rows.join("\n")).context("the page's rows lost the end line")?;
    let end_row = page.rows.iter().rposition(|r| r.contains(DONE)).unwrap_or(0);
    let right = end_row > 0 && page.rows[end_row - 1].trim_end() == stream.last;
    let rate = |us: f64| stream.bytes as f64 / 1e6 / (us / 1e6);
    Ok(StreamRound {
        bytes: stream.bytes,
        alone_mb_s: rate(alone_us),
        watched_mb_s: rate(watched_us),
        final_screen_after_ms: page.seen_at_ms - end_ms,
        final_screen_right: right,
        longest_task_ms: page.long_tasks_ms.iter().cloned().fold(0.0, f64::max),
        longest_load_task_ms: page.load_tasks_ms.iter().cloned().fold(0.0, f64::max),
        resyncs_asked: page.resyncs_asked,
        taken_in_bytes: page.consumed_bytes,
        started_quiet: alone_quiet && watched_quiet,
    })
}

/// Runs the stream page script (`web/bench/stream.mjs`) on session `id`: once the page
/// is connected and says `ready`, waits for a quiet machine and tells it to go. Returns
/// what it printed last, and whether the machine got quiet.
fn stream_page(web: &Path, up: &Up, exe: &Path, id: &str) -> Result<(Watched, bool)> {
    let mut child = node(web, up, exe, &["bench/stream.mjs", id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running node (is Node.js installed?)")?;
    let mut stdin = child.stdin.take().context("the page script's stdin")?;
    let mut stderr = child.stderr.take().context("the page script's stderr")?;
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let lines = BufReader::new(child.stdout.take().context("the page script's stdout")?).lines();
    let mut quiet = false;
    let mut last = String::new();
    for line in lines {
        let line = line?;
        if line == "ready" {
            quiet = wait_for_quiet(QUIET_WAIT);
            // A script that is gone by now fails below, with what it said.
            let _ = writeln!(stdin, "go");
        } else {
            last = line;
        }
    }
    let status = child.wait()?;
    let errors = errors.join().unwrap_or_default();
    if !status.success() {
        bail!("bench/stream.mjs failed: {errors}");
    }
    let page = serde_json::from_str(&last).with_context(|| format!("bench/stream.mjs printed {last:?}"))?;
    Ok((page, quiet))
}

fn in_the_page(web: &Path, up: &Up, exe: &Path, id: &str, keys: usize, gap_ms: u64, mode: &str) -> Result<InThePage> {
    let args = ["bench/terminal.mjs", id, &keys.to_string(), &gap_ms.to_string(), mode];
    let mut times: PageTimes = page_script(web, up, exe, &args)?;
    let p = times.parts_ms;
    let parts = Parts {
        input: median(p.input),
        page: median(p.page),
        to_worker: median(p.to_worker),
        round_trip: median(p.round_trip),
        to_page: median(p.to_page),
    };
    Ok(InThePage { message: Spread::of(&mut times.message_ms), screen: Spread::of(&mut times.screen_ms), parts })
}

/// `node ARGS` in `web`, against the bench's server and binary.
fn node(web: &Path, up: &Up, exe: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("node");
    cmd.current_dir(web).args(args).env("DROVER_HOME", up.home.path()).env("DROVER_BIN", exe);
    cmd
}

/// Runs a page script (`node ARGS` in `web`) against the bench's server and reads the
/// JSON line it prints last.
fn page_script<T: serde::de::DeserializeOwned>(web: &Path, up: &Up, exe: &Path, args: &[&str]) -> Result<T> {
    let out = node(web, up, exe, args).output().context("running node (is Node.js installed?)")?;
    if !out.status.success() {
        bail!("{} failed: {}", args[0], String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("{} printed {line:?}", args[0]))
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
        let part = |f: &dyn Fn(&Parts<f64>) -> f64| m(&|r| f(&of(r).parts));
        println!(
            "    to the message (p50): input dispatch {:.2}, xterm.js and the page {:.2}, to the socket's worker {:.2}, \
             the socket's round trip {:.2}, the ring to the page {:.2} ms",
            part(&|p| p.input),
            part(&|p| p.page),
            part(&|p| p.to_worker),
            part(&|p| p.round_trip),
            part(&|p| p.to_page),
        );
    };
    page("Chromium", &|r| &r.browser);
    page("Chromium undeferred", &|r| &r.undeferred);
    let Some(first) = b.stream.first() else { return };
    let s = |f: &dyn Fn(&StreamRound) -> f64| median(b.stream.iter().map(f).collect());
    let ratio = s(&|r| r.watched_mb_s / r.alone_mb_s);
    let after = s(&|r| r.final_screen_after_ms);
    let longest = b.stream.iter().map(|r| r.longest_task_ms).fold(0.0, f64::max);
    let longest_load = b.stream.iter().map(|r| r.longest_load_task_ms).fold(0.0, f64::max);
    let busy = b.stream.iter().filter(|r| !r.started_quiet).count();
    let right = b.stream.iter().all(|r| r.final_screen_right);
    println!(
        "  {} MB streamed, Chromium watching against no viewer ({} rounds; each side started on a quiet machine{}):",
        first.bytes >> 20,
        b.stream.len(),
        if busy == 0 { String::new() } else { format!(", except in {busy} rounds, still busy after 20 s") }
    );
    let ratios: Vec<f64> = b.stream.iter().map(|r| r.watched_mb_s / r.alone_mb_s).collect();
    let (low, high) = ratios.iter().fold((f64::MAX, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
    println!(
        "    the program's rate {:.1} against {:.1} MB/s: {ratio:.2}× ({low:.2}–{high:.2}; goal ≥ 0.9: {})",
        s(&|r| r.watched_mb_s),
        s(&|r| r.alone_mb_s),
        if ratio >= 0.9 { "met" } else { "not met" }
    );
    println!(
        "    the page took in {:.1} MB (median; the server held the rest back for a fresh screen) and asked for a re-sync {:.0} times",
        s(&|r| r.taken_in_bytes as f64 / 1e6),
        s(&|r| r.resyncs_asked as f64)
    );
    println!(
        "    final screen {} {after:.0} ms after the end (goal right, ≤ 1 s: {})",
        if right { "right" } else { "WRONG" },
        if right && after <= 1000.0 { "met" } else { "not met" }
    );
    println!(
        "    longest task while it streamed {longest:.0} ms (goal none over 200 ms: {}); while the page loaded {longest_load:.0} ms",
        if longest <= 200.0 { "met" } else { "not met" }
    );
}
