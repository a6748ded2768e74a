//! `drover completions SHELL` and `drover man`: shell completion scripts and manual pages
//! made from the command line's own definition, so they never drift from it.

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, ManArgs};

/// Prints the completion script for `args.shell` to stdout.
pub fn completions(args: CompletionsArgs) -> Result<()> {
    let mut cmd = public(Cli::command());
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "drover", &mut script);
    print_bytes(&script)
}

/// Writes `bytes` to stdout; a reader that closed it early (`| head`) is not an error.
fn print_bytes(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

/// Prints the top-level page, or writes every page into `--out`.
pub fn man(args: ManArgs, json: bool) -> Result<()> {
    let Some(dir) = args.out else {
        let mut out = Vec::new();
        clap_mangen::Man::new(Cli::command()).render(&mut out).context("rendering the manual page")?;
        return print_bytes(&out);
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Hidden commands (the shim, the hooks) get no page.
    clap_mangen::generate_to(Cli::command(), &dir).with_context(|| format!("writing the manual pages into {}", dir.display()))?;
    let pages = pages_in(&dir)?;
    if json {
        return super::print_json(&serde_json::json!({ "dir": dir, "pages": pages }));
    }
    println!("wrote {} manual pages into {} (read one with `man -l {}`)", pages.len(), dir.display(), dir.join("drover.1").display());
    Ok(())
}

/// The `*.1` files in `dir`, sorted.
fn pages_in(dir: &Path) -> Result<Vec<String>> {
    let mut pages: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".1"))
        .collect();
    pages.sort();
    Ok(pages)
}

/// The command line without its hidden commands (the shim, the hooks), which completion
/// generators would otherwise offer: the top level rebuilt from its visible parts.
fn public(cmd: clap::Command) -> clap::Command {
    let mut out = clap::Command::new("drover").version(env!("CARGO_PKG_VERSION")).propagate_version(true).subcommand_required(true);
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        out = out.arg(arg.clone());
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        out = out.subcommand(sub.clone());
    }
    out
}
