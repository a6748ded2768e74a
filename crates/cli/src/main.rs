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

/// glibc's allocator, set for processes that run for months. It gives each thread that
/// allocates its own arena (up to 8 per core), and a long-running server's freed memory
/// then stays spread over them, its RSS creeping up under the soak benchmark (figures in
/// the README's benchmark section): two arenas, without serialising every allocation.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes an allocator setting; it is called before any other
    // thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        // A fixed threshold: glibc otherwise raises it to the size of each large block
        // freed, so later large buffers (pages of stored output, rings) come from the
        // heap and leave it fragmented; mapped ones go back to the system when freed.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

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
    tune_malloc();
    private_files();
    quiet_on_closed_stdout();
    let cli = config::parse();
    logging::set_format(cli.log_format);
    if let args::Command::Shim { dir } = &cli.command {
        // The shim builds its own single-threaded runtime and must not share one.
        init_logging("warn");
        return match drover_term::shim::run(drover_term::dir::SessionDir::new(dir)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("drover shim: {e}");
                ExitCode::from(1)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    if matches!(cli.command, args::Command::Up(_) | args::Command::Server(_) | args::Command::Device(_)) {
        runtime.spawn(heap::trim_periodically());
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
