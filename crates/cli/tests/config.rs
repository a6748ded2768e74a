//! `drover.toml` end to end with the real binary: precedence per level (flag > env >
//! file > default) as `drover config show` reports it, unknown keys and wrong-typed
//! values refused by name, and a server started with nothing but the file listening
//! where the file says.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use support::*;

/// `drover ARGS` with no DROVER_* variable of the test's own environment, and `env`.
fn drover(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(bin());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("DROVER_")) {
        c.env_remove(k);
    }
    c.env("DROVER_HOME", home).envs(env.iter().copied()).args(args).stdin(Stdio::null()).output().expect("run drover")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `config show --json …`: key → (value, source).
fn show(home: &Path, env: &[(&str, &str)], args: &[&str]) -> std::collections::HashMap<String, (Value, String)> {
    let mut all = vec!["config", "show", "--json"];
    all.extend_from_slice(args);
    let out = drover(home, env, &all);
    assert!(out.status.success(), "config show {args:?}: {}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v["settings"]
        .as_array()
        .expect("settings")
        .iter()
        .map(|s| (s["key"].as_str().unwrap().to_string(), (s["value"].clone(), s["source"].as_str().unwrap().to_string())))
        .collect()
}

#[test]
fn each_level_wins_over_the_next() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("elsewhere.toml");
    std::fs::write(
        &file,
        r#"
[server]
stall-secs = 600                                  # the file alone
public-url = "https://file.example.com"           # the file and the environment
listen = "127.0.0.1:7001"                         # the file, the environment and a flag
database = "postgres://drover:hunter2@db.invalid/drover"
trusted-proxy = ["10.0.0.2", "10.9.0.0/16"]

[device]
name = "from-file"
slots = 3
token = "dre_not-a-real-token-but-secret"
unsandboxed = true
"#,
    )
    .unwrap();
    let path = file.display().to_string();
    let env = [("DROVER_PUBLIC_URL", "https://env.example.com"), ("DROVER_LISTEN", "127.0.0.1:7002"), ("DROVER_CONFIG", &path)];
    let s = show(home.path(), &env, &["server", "--listen", "127.0.0.1:7003"]);
    let at = |k: &str| s.get(k).unwrap_or_else(|| panic!("no {k} in {s:?}")).clone();
    let from_file = format!("file {path}");
    assert_eq!(at("stall-secs"), (Value::from("600"), from_file.clone()));
    assert_eq!(at("public-url"), (Value::from("https://env.example.com"), "env DROVER_PUBLIC_URL".into()));
    assert_eq!(at("listen"), (Value::from("127.0.0.1:7003"), "flag".into()));
    assert_eq!(at("park-after"), (Value::from("86400"), "default".into()));
    assert_eq!(at("tls-cert"), (Value::Null, "default".into()), "unset");
    assert_eq!(at("insecure-http"), (Value::Bool(false), "default".into()));
    assert_eq!(at("trusted-proxy"), (serde_json::json!(["10.0.0.2", "10.9.0.0/16"]), from_file.clone()));
    assert_eq!(at("database"), (Value::from("postgres://drover:****@db.invalid/drover"), from_file.clone()), "password concealed");
    assert_eq!(at("log-format"), (Value::from("text"), "default".into()));
    assert!(!s.contains_key("slots") && !s.contains_key("json") && !s.contains_key("config"), "only the server's settings");

    // `up` takes [server] and the device flags it has; the daemon, its own section.
    let up = show(home.path(), &env, &["up", "--slots", "5"]);
    assert_eq!(up["name"], (Value::from("from-file"), from_file.clone()));
    assert_eq!(up["slots"], (Value::from("5"), "flag".into()));
    assert_eq!(up["unsandboxed"], (Value::Bool(true), from_file.clone()));
    assert_eq!(up["listen"], (Value::from("127.0.0.1:7002"), "env DROVER_LISTEN".into()));
    assert!(!up.contains_key("token") && !up.contains_key("server"));
    let device = show(home.path(), &env, &["device"]);
    assert_eq!(device["token"], (Value::from("(concealed)"), from_file.clone()));
    assert_eq!(device["slots"], (Value::from("3"), from_file.clone()));
    assert_eq!(device["server"], (Value::Null, "default".into()));

    // For people: a table, with nothing secret in it either.
    let out = drover(home.path(), &[("DROVER_CONFIG", &path)], &["config", "show", "server"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains(&format!("# drover server: configuration file {path}")), "{text}");
    assert!(text.lines().any(|l| l.contains("stall-secs") && l.contains("600") && l.contains(&from_file)), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

#[test]
fn the_home_file_is_read_when_no_other_is_named() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("drover.toml"), "[server]\nstall-secs = 42\n").unwrap();
    let s = show(home.path(), &[], &["server"]);
    assert_eq!(s["stall-secs"], (Value::from("42"), format!("file {}", home.path().join("drover.toml").display())));
    // Without one, everything is the default.
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(show(empty.path(), &[], &["server"])["stall-secs"], (Value::from("1800"), "default".into()));
}

#[test]
fn unknown_keys_and_wrong_types_are_refused_by_name() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("drover.toml");
    let refused = |text: &str, args: &[&str]| -> String {
        std::fs::write(&file, text).unwrap();
        let out = drover(home.path(), &[], args);
        assert!(!out.status.success(), "{text} should be refused: {}", stderr(&out));
        stderr(&out)
    };
    let shown = file.display().to_string();
    let e = refused("[server]\nlisen = \"127.0.0.1:7070\"\n", &["server"]);
    assert!(e.contains(&format!("{shown}: [server] unknown key \"lisen\" (did you mean \"listen\"?)")), "{e}");
    let e = refused("[device]\nslot = 3\n", &["device"]);
    assert!(e.contains("[device] unknown key \"slot\""), "{e}");
    let e = refused("[server]\nstall-secs = \"soon\"\n", &["server"]);
    assert!(e.contains(&format!("{shown}: [server] stall-secs: invalid value 'soon'")), "{e}");
    let e = refused("[device]\nunsandboxed = \"yes\"\n", &["up"]);
    assert!(e.contains("[device] unsandboxed: expects true or false"), "{e}");
    let e = refused("[server]\nlisten = [\"127.0.0.1:7070\"]\n", &["server"]);
    assert!(e.contains("[server] listen: takes one value, not a list"), "{e}");
    // `config show` says the same.
    let e = refused("[server]\nlisen = \"127.0.0.1:7070\"\n", &["config", "show"]);
    assert!(e.contains("unknown key \"lisen\""), "{e}");
    // A file named but missing is an error, not silently nothing.
    let out = drover(home.path(), &[], &["--config", "/nonexistent/drover.toml", "server"]);
    assert!(!out.status.success() && stderr(&out).contains("cannot read the configuration file /nonexistent/drover.toml"));
}

#[test]
fn a_server_listens_where_its_file_says() {
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(home.path().join("drover.toml"), format!("[server]\nlisten = \"127.0.0.1:{port}\"\nstop-grace = 1\n")).unwrap();
    let mut c = Command::new(bin());
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("DROVER_")) {
        c.env_remove(k);
    }
    if let Some(db) = test_database(home.path()) {
        c.env("DROVER_DATABASE", db);
    }
    let mut server = c
        .arg("server")
        .env("DROVER_HOME", home.path())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn drover server");
    let url = read_url(&mut server, "Drover server is running at ");
    let health = http(&url, "GET", "/api/v1/health", None, b"");
    let _ = server.kill();
    let _ = server.wait();
    if let Some(db) = test_database(home.path()) {
        drop_database(&db);
    }
    assert_eq!(url, format!("http://127.0.0.1:{port}"));
    assert_eq!(health, (200, "ok".to_string()));
}
