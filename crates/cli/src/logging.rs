//! The daemons' logs on stderr: text for people or JSON lines for a log pipeline, filtered by `RUST_LOG`.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// How log lines are written (`--log-format`, `DROVER_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per event, with its spans' fields before the message.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `message` and the
    /// event's fields, `span` (the innermost span's name and fields) and `spans` (every
    /// span it is in, outermost first: `http` with `request_id`, `device`, `session`, …).
    Json,
}

/// The format chosen on the command line (0: text, 1: JSON).
static FORMAT: AtomicU8 = AtomicU8::new(0);
/// Whether a JSON subscriber is installed: messages then go through it, never as bare text.
static JSON_ACTIVE: AtomicBool = AtomicBool::new(false);

/// Remembers the format for [`init`] (called before the command runs).
pub fn set_format(format: LogFormat) {
    FORMAT.store(format as u8, Ordering::Relaxed);
}

/// Installs the subscriber: stderr, filtered by `RUST_LOG` (else `default`), in the
/// format [`set_format`] chose, coloured when stderr is a terminal.
pub fn init(default: &str) {
    init_with(default, std::io::IsTerminal::is_terminal(&std::io::stderr()));
}

/// As [`init`], for a process whose stderr becomes a file later (the shim launcher's
/// forks): never coloured.
pub fn init_uncoloured(default: &str) {
    init_with(default, false);
}

fn init_with(default: &str, ansi: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    if FORMAT.load(Ordering::Relaxed) == LogFormat::Json as u8 {
        let installed = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init()
            .is_ok();
        JSON_ACTIVE.store(installed, Ordering::Relaxed);
        return;
    }
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).try_init();
}

/// Tells the operator something on stderr: a plain line, or (JSON logs) a log event, so
/// that every line of stderr stays parseable.
pub fn notice(message: &str) {
    if JSON_ACTIVE.load(Ordering::Relaxed) {
        tracing::info!(target: "drover", "{message}");
    } else {
        eprintln!("{message}");
    }
}

/// Warns the operator: `warning: …` on stderr, or (JSON logs) a warning event.
pub fn warning(message: &str) {
    if JSON_ACTIVE.load(Ordering::Relaxed) {
        tracing::warn!(target: "drover", "{message}");
    } else {
        eprintln!("warning: {message}");
    }
}

/// Reports the error that ends the process: `error: …` on stderr, or (JSON logs) an
/// error event.
pub fn fatal(message: &str) {
    if JSON_ACTIVE.load(Ordering::Relaxed) {
        tracing::error!(target: "drover", "{message}");
    } else {
        eprintln!("error: {message}");
    }
}
