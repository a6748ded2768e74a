//! `drover config show`: the settings a daemon would run with, and where each came from.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Result};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches};
use serde::Serialize;

use super::{built, find, resolve, settable, Failure, Resolved};

/// One setting as shown.
#[derive(Debug, Serialize)]
pub struct Row {
    /// The file's section it belongs in.
    pub section: String,
    /// Its key (the long flag).
    pub key: String,
    /// Its value: a string, a list, a boolean, or null when unset; secrets concealed.
    pub value: serde_json::Value,
    /// Where it came from: `flag`, `env NAME`, `file PATH` or `default`.
    pub source: String,
}

/// The whole answer.
#[derive(Debug, Serialize)]
struct Shown {
    command: String,
    file: Option<String>,
    settings: Vec<Row>,
}

/// `drover config show [up|server|device] [FLAGS…]`.
pub fn show(args: &[OsString], json: bool, config: Option<&Path>) -> Result<()> {
    let (target, rest) = match args.first().and_then(|a| a.to_str()) {
        Some(t @ ("up" | "server" | "device")) => (t, &args[1..]),
        Some(t) if !t.starts_with('-') => bail!("`{t}` has no settings to show: give up, server or device"),
        _ => ("up", args),
    };
    let mut argv: Vec<OsString> = vec!["drover".into()];
    if let Some(config) = config {
        argv.extend(["--config".into(), config.into()]);
    }
    argv.push(target.into());
    argv.extend(rest.iter().cloned());
    let resolved = match resolve(argv) {
        Ok(r) => r,
        Err(Failure::Usage(e)) => e.exit(),
        Err(Failure::Config(e)) => return Err(e),
    };
    let sub = resolved.matches.subcommand_matches(target).expect("parsed as this command");
    if sub.subcommand().is_some() {
        bail!("`drover config show device` takes the daemon's flags, not a subcommand");
    }
    let shown = Shown {
        command: target.to_string(),
        file: resolved.file.as_ref().map(|f| f.display().to_string()),
        settings: rows(target, &resolved, sub),
    };
    if json || sub.get_flag("json") {
        return crate::commands::print_json(&shown);
    }
    println!("# drover {target}: configuration file {}", shown.file.as_deref().unwrap_or("(none)"));
    let table: Vec<Vec<String>> =
        shown.settings.iter().map(|r| vec![format!("[{}]", r.section), r.key.clone(), text(&r.value), r.source.clone()]).collect();
    crate::table::print(&["SECTION", "KEY", "VALUE", "SOURCE"], &table);
    Ok(())
}

/// Every setting of `target`, in the order its help lists them.
fn rows(target: &str, resolved: &Resolved, sub: &ArgMatches) -> Vec<Row> {
    let built = built();
    let cmd = built.find_subcommand(target).expect("a daemon command");
    let server = built.find_subcommand("server").expect("the server command");
    cmd.get_arguments()
        .filter(|a| settable(a))
        .map(|arg| {
            let key = arg.get_long().expect("settings are long flags").to_string();
            let section = match target {
                "up" if find(server, &key).is_none() => "device",
                "up" => "server",
                t => t,
            };
            Row { section: section.into(), value: value(arg, sub), source: source(arg, resolved, sub), key }
        })
        .collect()
}

/// The value clap holds for `arg`, with secrets concealed.
fn value(arg: &Arg, sub: &ArgMatches) -> serde_json::Value {
    use serde_json::Value;
    let id = arg.get_id().as_str();
    let raw: Vec<String> = sub.get_raw(id).map(|v| v.map(|s| s.to_string_lossy().into_owned()).collect()).unwrap_or_default();
    let secret = ["token", "password", "secret"].iter().any(|w| id.contains(w));
    let shown = |s: &String| if secret { "(concealed)".to_string() } else { conceal_url(s) };
    match arg.get_action() {
        ArgAction::SetTrue => Value::Bool(raw.first().is_some_and(|v| v == "true")),
        ArgAction::Append => Value::Array(raw.iter().map(|s| Value::String(shown(s))).collect()),
        _ => raw.first().map(|s| Value::String(shown(s))).unwrap_or(Value::Null),
    }
}

/// A URL with its password replaced (`postgres://drover:****@db/drover`); anything else as it is.
pub(super) fn conceal_url(s: &str) -> String {
    match reqwest::Url::parse(s) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some("****"));
            url.to_string()
        }
        _ => s.to_string(),
    }
}

/// Where the value of `arg` came from.
fn source(arg: &Arg, resolved: &Resolved, sub: &ArgMatches) -> String {
    let id = arg.get_id().as_str();
    if let (true, Some(file)) = (resolved.from_file.iter().any(|f| f == id), &resolved.file) {
        return format!("file {}", file.display());
    }
    match sub.value_source(id) {
        Some(ValueSource::CommandLine) => "flag".into(),
        Some(ValueSource::EnvVariable) => format!("env {}", arg.get_env().map(|e| e.to_string_lossy()).unwrap_or_default()),
        _ => "default".into(),
    }
}

/// A value as a table cell.
fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) if items.is_empty() => "[]".into(),
        serde_json::Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}
