//! Unit tests of reading `drover.toml` into the command line.

use super::*;
use crate::args::Command as Cmd;

/// A file with `text` and the argv `drover --config FILE ARGS…`.
fn with_file(text: &str, args: &[&str]) -> (tempfile::TempDir, Vec<OsString>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drover.toml");
    std::fs::write(&file, text).unwrap();
    let mut argv: Vec<OsString> = vec!["drover".into(), "--config".into(), file.into()];
    argv.extend(args.iter().map(OsString::from));
    (dir, argv)
}

fn cli(text: &str, args: &[&str]) -> Cli {
    let (_dir, argv) = with_file(text, args);
    match resolve(argv) {
        Ok(r) => Cli::from_arg_matches(&r.matches).unwrap(),
        Err(Failure::Usage(e)) => panic!("usage: {e}"),
        Err(Failure::Config(e)) => panic!("config: {e}"),
    }
}

fn config_error(text: &str, args: &[&str]) -> String {
    let (_dir, argv) = with_file(text, args);
    match resolve(argv) {
        Err(Failure::Config(e)) => format!("{e:#}"),
        Err(Failure::Usage(e)) => panic!("expected a file error, got usage: {e}"),
        Ok(_) => panic!("expected a file error"),
    }
}

const FILE: &str = r#"
[server]
listen = "127.0.0.1:7171"
stall-secs = 600
trusted-proxy = ["10.0.0.2", "10.1.0.0/16"]
allow-local-webhooks = true
log-format = "json"

[device]
server = "https://drover.example.com"
name = "builder"
slots = 3
unsandboxed = true
sandbox-write = ["/var/cache/x"]
"#;

#[test]
fn the_server_takes_its_section() {
    let Cmd::Server(a) = cli(FILE, &["server"]).command else { panic!("server") };
    assert_eq!(a.listen.to_string(), "127.0.0.1:7171");
    assert_eq!(a.stall_secs, 600.0);
    assert_eq!(a.trusted_proxies.len(), 2);
    assert!(a.allow_local_webhooks);
    assert!(!a.insecure_http, "a switch the file does not set stays off");
    assert_eq!(a.park_after, 24.0 * 3600.0, "a key the file does not set keeps its default");
}

#[test]
fn a_flag_beats_the_file() {
    let c = cli(FILE, &["server", "--listen", "127.0.0.1:9", "--trusted-proxy", "192.0.2.1", "--log-format", "text"]);
    assert_eq!(c.log_format, crate::logging::LogFormat::Text);
    let Cmd::Server(a) = c.command else { panic!("server") };
    assert_eq!(a.listen.to_string(), "127.0.0.1:9");
    assert_eq!(a.trusted_proxies.len(), 1, "a list given on the command line replaces the file's");
    assert_eq!(a.stall_secs, 600.0);
}

#[test]
fn global_flags_are_settable() {
    assert_eq!(cli(FILE, &["server"]).log_format, crate::logging::LogFormat::Json);
}

#[test]
fn up_takes_the_server_section_and_its_device_flags() {
    let Cmd::Up(a) = cli(FILE, &["up"]).command else { panic!("up") };
    assert_eq!(a.server.listen.to_string(), "127.0.0.1:7171");
    assert_eq!((a.name.as_deref(), a.slots), (Some("builder"), 3));
    assert!(a.sandbox.unsandboxed);
    assert_eq!(a.sandbox.sandbox_write, vec![PathBuf::from("/var/cache/x")]);
}

#[test]
fn the_device_takes_its_section() {
    let Cmd::Device(d) = cli(FILE, &["device"]).command else { panic!("device") };
    assert!(d.command.is_none());
    assert_eq!(d.run.server.as_deref(), Some("https://drover.example.com"));
    assert_eq!(d.run.slots, Some(3));
    // A device subcommand is not the daemon: the file is not read for it.
    let Cmd::Device(d) = cli("[device]\nslots = \"many\"\n", &["device", "list"]).command else { panic!("device") };
    assert!(d.command.is_some());
}

#[test]
fn other_commands_do_not_read_the_file() {
    let c = cli("[server]\nlisten = 3\n", &["session", "list"]);
    assert!(matches!(c.command, Cmd::Session(_)));
}

#[test]
fn unknown_keys_are_refused_by_name() {
    let e = config_error("[server]\nlisen = \"127.0.0.1:1\"\n", &["server"]);
    assert!(e.contains("drover.toml: [server] unknown key \"lisen\""), "{e}");
    assert!(e.contains("did you mean \"listen\""), "{e}");
    let e = config_error("[server]\nslots = 3\n", &["server"]);
    assert!(e.contains("[server] unknown key \"slots\": it belongs in [device]"), "{e}");
    // Refused whichever command runs: a typo is not left to be found later.
    let e = config_error("[device]\nstall-secs = 3\n", &["up"]);
    assert!(e.contains("[device] unknown key \"stall-secs\": it belongs in [server]"), "{e}");
    let e = config_error("[servre]\nlisten = \"x\"\n", &["server"]);
    assert!(e.contains("unknown section [servre]"), "{e}");
    let e = config_error("listen = \"x\"\n", &["server"]);
    assert!(e.contains("`listen` is outside any section"), "{e}");
    // Not settings: the file cannot name another file, nor the output format of clients.
    let e = config_error("[server]\nconfig = \"x\"\n", &["server"]);
    assert!(e.contains("unknown key \"config\""), "{e}");
}

#[test]
fn values_of_the_wrong_type_are_refused_by_name() {
    let e = config_error("[server]\nstall-secs = \"soon\"\n", &["server"]);
    assert!(e.contains("[server] stall-secs: invalid value 'soon'"), "{e}");
    let e = config_error("[server]\ninsecure-http = \"yes\"\n", &["server"]);
    assert!(e.contains("[server] insecure-http: expects true or false"), "{e}");
    let e = config_error("[server]\nlisten = [\"127.0.0.1:1\"]\n", &["server"]);
    assert!(e.contains("[server] listen: takes one value, not a list"), "{e}");
    let e = config_error("[server]\nlisten = 7070\n", &["server"]);
    assert!(e.contains("[server] listen: invalid value '7070'"), "{e}");
    let e = config_error("[device]\nslots = -1\n", &["device"]);
    assert!(e.contains("[device] slots: invalid value '-1'"), "{e}");
    let e = config_error("[server]\nlisten = \n", &["server"]);
    assert!(e.contains("drover.toml: line 2:"), "{e}");
}

#[test]
fn a_missing_named_file_is_an_error() {
    let argv = vec!["drover".into(), "--config".into(), "/nonexistent/drover.toml".into(), "server".into()];
    let Err(Failure::Config(e)) = resolve(argv) else { panic!("expected an error") };
    assert!(format!("{e:#}").contains("cannot read the configuration file /nonexistent/drover.toml"), "{e:#}");
}

#[test]
fn urls_lose_their_password() {
    assert_eq!(show::conceal_url("postgres://drover:hunter2@db:5432/drover"), "postgres://drover:****@db:5432/drover");
    assert_eq!(show::conceal_url("sqlite:/var/lib/drover/drover.db"), "sqlite:/var/lib/drover/drover.db");
    assert_eq!(show::conceal_url("127.0.0.1:7070"), "127.0.0.1:7070");
}

#[test]
fn edit_distance() {
    assert_eq!(distance("lisen", "listen"), 1);
    assert_eq!(distance("", "ab"), 2);
    assert_eq!(distance("slots", "slots"), 0);
}
