//! `drover`: one binary for every part of Drover — `up` (server and local device in one
//! process), `server`, `device`, the session commands, and the hidden per-session `shim`.

mod args;
mod attach;
mod client;
mod commands;
mod config;
mod heap;
mod home;
mod logging;
mod mcp;
mod metrics;
mod reconnect;
mod table;
mod tail;
mod up;

use std::process::ExitCode;

/// Everything Drover writes (its home, the database and its WAL, session directories,
/// recordings, logs, exports) is its user's alone, whatever umask it was started with:
/// the runs it starts get the conventional 022 back (`drover_term::pty`).
fn private_files() {
    // SAFETY: umask only changes this process's file creation mask.
    unsafe {
        libc::umask(0o077);
    }
}

/// A closed standard output (`drover session list | head -1`) ends the command quietly
/// with status 0, as it does for other Unix tools: `println!` panics on EPIPE, and that
/// one panic is taken as the reader having had enough.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message =
            info.payload().downcast_ref::<String>().map(String::as_str).or_else(|| info.payload().downcast_ref::<&str>().copied());
        if message.is_some_and(|m| m.starts_with("failed printing to stdout") && m.contains("Broken pipe")) {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    private_files();
    quiet_on_closed_stdout();
    if std::env::args_os().nth(1).is_some_and(|a| a == drover_device::launcher::SUBCOMMAND) {
        return shim_launcher();
    }
    let cli = config::parse();
    logging::set_format(cli.log_format);
    if let args::Command::ShimLauncher = &cli.command {
        return shim_launcher();
    }
    // Attach is one task that waits on a terminal and a socket or two, as `tmux attach`
    // is one thread: on a single-threaded runtime a keystroke and its echo each wake one
    // thread, never a second one.
    let mut builder = match &cli.command {
        args::Command::Session(args::SessionCmd::Attach { .. }) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    if matches!(cli.command, args::Command::Up(_) | args::Command::Server(_) | args::Command::Device(_)) {
        heap::purge_in_background();
        drover_server::read_heap_with(heap::now);
    }
    let code = match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            logging::fatal(&one_line(&e));
            ExitCode::from(1)
        }
    };
    // A read of standard input may still be blocked in a runtime thread (attach): do not
    // wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

/// The device daemon's shim launcher (`drover shim-launcher`, started by the daemon),
/// dispatched before the command line is parsed: every shim is a fork of it and shares
/// its heap, which is then the smaller. It forks the shims, each of which builds its own
/// single-threaded runtime, so it has one thread and no runtime of its own. Its logging
/// is set up once, here, for every shim: warnings, uncoloured (each shim's stderr is its
/// `shim.log`), in the format `DROVER_LOG_FORMAT` names. A shim's allocator keeps the
/// pages it frees while its session prints, and hands them back as it goes quiet.
fn shim_launcher() -> ExitCode {
    let format = std::env::var("DROVER_LOG_FORMAT").ok().and_then(|v| <logging::LogFormat as clap::ValueEnum>::from_str(&v, true).ok());
    if let Some(format) = format {
        logging::set_format(format);
    }
    logging::init_uncoloured("warn");
    drover_term::heap::keep_freed_pages_with(heap::keep_freed_pages);
    match drover_device::launcher::serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("drover shim-launcher: {e}");
            ExitCode::from(1)
        }
    }
}

/// The error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ")
}

/// Logs to stderr, filtered by `RUST_LOG` (default `default`), as `--log-format` says.
pub fn init_logging(default: &str) {
    logging::init(default);
}
