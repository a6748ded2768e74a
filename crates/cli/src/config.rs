//! `drover.toml`: the settings of `up`, `server` and `device` from a file, below flags and environment variables.
//!
//! The file's keys are the commands' long flag names, found in the clap definitions
//! themselves, so every flag (a new one too) is settable with no code here. `[server]`
//! holds `drover server`'s flags, `[device]` the device daemon's; `drover up` takes both
//! (of `[device]`, the flags it has too). A key the file sets is passed on as
//! `--key=value` only when neither the command line nor the environment set that flag,
//! and clap checks its value as it checks any other: flag > env > file > default.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};

use crate::args::Cli;

mod show;
pub use show::show;

/// The file's sections; each is named after the command whose flags it sets.
const SECTIONS: [&str; 2] = ["server", "device"];

/// Flags that are not settings: never read from the file, never shown.
const NOT_SETTINGS: [&str; 4] = ["help", "version", "config", "json"];

/// What stopped the command line from being read.
pub enum Failure {
    /// The command line itself (clap's own message, help and version included).
    Usage(clap::Error),
    /// The configuration file.
    Config(anyhow::Error),
}

/// The command line, with what the configuration file added.
pub struct Resolved {
    /// The parsed command line, the file's settings included.
    pub matches: ArgMatches,
    /// The configuration file read, if any.
    pub file: Option<PathBuf>,
    /// The ids of the flags whose value is the file's.
    pub from_file: Vec<String>,
}

/// One key of the file: its section and name, and the arguments it stands for.
#[derive(Debug)]
struct Setting {
    section: String,
    key: String,
    args: Vec<OsString>,
}

/// Parses this process's command line with the configuration file's settings; exits
/// with clap's message, or the file's problem, when it cannot.
pub fn parse() -> Cli {
    let resolved = match resolve(std::env::args_os().collect()) {
        Ok(r) => r,
        Err(Failure::Usage(e)) => e.exit(),
        Err(Failure::Config(e)) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    };
    Cli::from_arg_matches(&resolved.matches).unwrap_or_else(|e| e.format(&mut Cli::command()).exit())
}

/// Parses `argv`; for `up`, `server` and `device` (the daemon), adds the settings of the
/// configuration file that neither a flag nor the environment gave.
pub fn resolve(argv: Vec<OsString>) -> Result<Resolved, Failure> {
    let matches = Cli::command().try_get_matches_from(&argv).map_err(Failure::Usage)?;
    let Some((daemon, sub)) = daemon(&matches) else { return Ok(Resolved { matches, file: None, from_file: Vec::new() }) };
    let Some(file) = file_path(sub) else { return Ok(Resolved { matches, file: None, from_file: Vec::new() }) };
    let mut settings = read(&file).map_err(Failure::Config)?;
    // For `up`, a flag both sections may set is the server's.
    settings.sort_by_key(|s| s.section != "server");
    let built = built();
    let target = built.find_subcommand(daemon).expect("the daemons are commands");
    let mut argv = argv;
    let mut from_file: Vec<String> = Vec::new();
    let mut applied: Vec<&Setting> = Vec::new();
    for setting in settings.iter().filter(|s| s.section == daemon || daemon == "up") {
        // `[device] server` and `token` are the daemon's alone: `up` has no such flags.
        let Some(arg) = find(target, &setting.key) else { continue };
        let id = arg.get_id().as_str();
        if from_file.iter().any(|f| f == id) || !matches!(sub.value_source(id), None | Some(ValueSource::DefaultValue)) {
            continue;
        }
        argv.extend(setting.args.iter().cloned());
        from_file.push(id.to_string());
        applied.push(setting);
    }
    let matches = Cli::command().try_get_matches_from(&argv).map_err(|e| blame(e, &file, &applied))?;
    Ok(Resolved { matches, file: Some(file), from_file })
}

/// The daemon the command line runs, if any, and its matches.
fn daemon(matches: &ArgMatches) -> Option<(&'static str, &ArgMatches)> {
    match matches.subcommand()? {
        ("up", m) => Some(("up", m)),
        ("server", m) => Some(("server", m)),
        ("device", m) if m.subcommand().is_none() => Some(("device", m)),
        _ => None,
    }
}

/// The file to read: `--config` (or `DROVER_CONFIG`), else `$DROVER_HOME/drover.toml`
/// if it exists.
fn file_path(matches: &ArgMatches) -> Option<PathBuf> {
    if let Some(path) = matches.get_one::<PathBuf>("config") {
        return Some(path.clone());
    }
    let path = crate::home::home().ok()?.join("drover.toml");
    path.is_file().then_some(path)
}

/// The command tree with its global flags propagated to every subcommand.
fn built() -> Command {
    let mut cmd = Cli::command();
    cmd.build();
    cmd
}

/// Whether `arg` is a setting: a long flag taking a value, or a switch.
fn settable(arg: &Arg) -> bool {
    !arg.is_positional()
        && arg.get_long().is_some()
        && !NOT_SETTINGS.contains(&arg.get_id().as_str())
        && matches!(arg.get_action(), ArgAction::Set | ArgAction::Append | ArgAction::SetTrue)
}

/// The setting of `cmd` whose long flag is `key`.
fn find<'c>(cmd: &'c Command, key: &str) -> Option<&'c Arg> {
    cmd.get_arguments().find(|a| settable(a) && a.get_long() == Some(key))
}

/// Reads and checks the file: known sections, known keys, values of the right shape.
fn read(file: &Path) -> Result<Vec<Setting>> {
    let shown = file.display();
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read the configuration file {shown}"))?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map(|s| text[..s.start].lines().count().max(1)).unwrap_or(1);
        anyhow!("{shown}: line {line}: {}", e.message().trim())
    })?;
    let built = built();
    let mut out = Vec::new();
    for (section, value) in &table {
        let toml::Value::Table(keys) = value else {
            bail!("{shown}: `{section}` is outside any section: put it under [server] or [device]");
        };
        if !SECTIONS.contains(&section.as_str()) {
            bail!("{shown}: unknown section [{section}]; the sections are [server] and [device]");
        }
        let cmd = built.find_subcommand(section).expect("each section is a command");
        for (key, value) in keys {
            let Some(arg) = find(cmd, key) else { bail!("{shown}: {}", unknown(&built, section, key)) };
            let args = to_args(arg, value).map_err(|why| anyhow!("{shown}: [{section}] {key}: {why}"))?;
            out.push(Setting { section: section.clone(), key: key.clone(), args });
        }
    }
    Ok(out)
}

/// Says that `[section] key` is unknown, and what was perhaps meant.
fn unknown(built: &Command, section: &str, key: &str) -> String {
    let head = format!("[{section}] unknown key \"{key}\"");
    if let Some(other) = SECTIONS.iter().find(|s| **s != section && built.find_subcommand(s).and_then(|c| find(c, key)).is_some()) {
        return format!("{head}: it belongs in [{other}]");
    }
    let cmd = built.find_subcommand(section).expect("each section is a command");
    let near = cmd.get_arguments().filter(|a| settable(a)).filter_map(Arg::get_long).min_by_key(|long| distance(long, key));
    match near {
        Some(near) if distance(near, key) <= 2 => format!("{head} (did you mean \"{near}\"?)"),
        _ => format!("{head}; the keys are the long flags of `drover {section} --help`"),
    }
}

/// The edit distance between two short words.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = if ca == *cb { prev } else { 1 + prev.min(row[j]).min(here) };
            prev = here;
        }
    }
    row[b.len()]
}

/// The arguments a file value stands for (`--key=value`, repeated for a list).
fn to_args(arg: &Arg, value: &toml::Value) -> Result<Vec<OsString>, String> {
    let long = arg.get_long().expect("settings are long flags");
    match (arg.get_action(), value) {
        (ArgAction::SetTrue, toml::Value::Boolean(on)) => Ok(if *on { vec![format!("--{long}").into()] } else { Vec::new() }),
        (ArgAction::SetTrue, _) => Err("expects true or false".into()),
        (ArgAction::Append, toml::Value::Array(items)) => items.iter().map(|v| scalar(v).map(|s| format!("--{long}={s}").into())).collect(),
        (_, toml::Value::Array(_)) => Err("takes one value, not a list".into()),
        (_, v) => Ok(vec![format!("--{long}={}", scalar(v)?).into()]),
    }
}

/// A single file value as the command line would give it.
fn scalar(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        toml::Value::Datetime(d) => Ok(d.to_string()),
        toml::Value::Array(_) | toml::Value::Table(_) => Err("expects a single value (a string, number or boolean)".into()),
    }
}

/// A value clap refused: the file's fault when the flag is one the file set.
fn blame(e: clap::Error, file: &Path, applied: &[&Setting]) -> Failure {
    use clap::error::{ContextKind, ContextValue};
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.split([' ', '=']).next().unwrap_or_default().to_string(),
        _ => return Failure::Usage(e),
    };
    match applied.iter().find(|s| flag == format!("--{}", s.key)) {
        Some(s) => Failure::Config(anyhow!("{}: [{}] {}: {}", file.display(), s.section, s.key, first_line(&e))),
        None => Failure::Usage(e),
    }
}

/// A clap error's message, on one line, without its `error: `.
fn first_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    text.lines().next().unwrap_or_default().trim_start_matches("error: ").to_string()
}

#[cfg(test)]
mod tests;
