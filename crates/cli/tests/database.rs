//! End-to-end: `drover migrate`, and moving a workspace to another database engine with
//! `drover export` and `drover import` — SQLite to PostgreSQL in the SQLite pass (the
//! PostgreSQL server in `DROVER_TEST_POSTGRES`), back again in the PostgreSQL pass
//! (SQLite to SQLite when no PostgreSQL is at hand).

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::{bin, read_url, secs, spawn_drover_on, test_database, Drover};

/// `drover ARGS` with `home` and, when given, `DROVER_DATABASE`.
fn drover(home: &Path, db: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(bin());
    c.args(args).env("DROVER_HOME", home).env_remove("DROVER_DATABASE").stdin(Stdio::null());
    if let Some(db) = db {
        c.env("DROVER_DATABASE", db);
    }
    c.output().expect("run drover")
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails(out: Output) -> String {
    assert!(!out.status.success(), "succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_workspace_moves_to_another_engine_with_its_sessions_output_and_audit_trail() {
    let mut d = Drover::up();
    let id = d.start(&["sh", "-c", "printf 'moved with care %s\\n' one two three"]);
    d.wait_ended(&id, secs(20));
    d.ok(&["session", "input", &d.start(&["cat"]), "an audited line"]);
    let before = d.show(&id);
    d.kill_up();
    support::kill_sessions(d.home.path());

    // The source: what `up` used (the harness's engine); the target: the other one.
    let source = test_database(d.home.path());
    let target_home = tempfile::tempdir().unwrap();
    let postgres = std::env::var("DROVER_TEST_POSTGRES").or_else(|_| std::env::var("DROVER_TEST_DATABASE")).ok().filter(|s| !s.is_empty());
    let target = match (&source, postgres) {
        (None, Some(server)) => format!("{}/drover_moved_{}", server.trim_end_matches('/'), std::process::id()),
        _ => format!("sqlite:{}", target_home.path().join("drover.db").display()),
    };
    if target.starts_with("postgres") {
        support::drop_database(&target);
    }

    let file = d.home.path().join("workspace.export");
    let said = ok(drover(d.home.path(), source.as_deref(), &["export", "--out", file.to_str().unwrap()]));
    assert!(said.contains("rows") && said.contains("bytes of session output"), "{said}");
    let again = fails(drover(d.home.path(), source.as_deref(), &["export", "--out", file.to_str().unwrap()]));
    assert!(again.contains("must not exist"), "{again}");

    // A cut-short file is refused and loads nothing.
    let cut = d.home.path().join("cut.export");
    let whole = std::fs::read(&file).unwrap();
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
    let cut_home = tempfile::tempdir().unwrap();
    let cut_db = format!("sqlite:{}", cut_home.path().join("cut.db").display());
    let refused = fails(drover(cut_home.path(), None, &["import", cut.to_str().unwrap(), "--database", &cut_db]));
    assert!(refused.contains("export"), "{refused}");

    let loaded = ok(drover(target_home.path(), None, &["import", file.to_str().unwrap(), "--database", &target]));
    assert!(loaded.contains("imported"), "{loaded}");
    let twice = fails(drover(target_home.path(), None, &["import", file.to_str().unwrap(), "--database", &target]));
    assert!(twice.contains("already holds a workspace"), "{twice}");
    let migrated = ok(drover(target_home.path(), None, &["migrate", "--database", &target]));
    assert!(migrated.contains("up to date"), "{migrated}");

    // A server on the target has it all: the session, what it printed, its events.
    let mut server = spawn_drover_on(target_home.path(), Some(&target), &["server", "--listen", "127.0.0.1:0"]);
    let url = read_url(&mut server, "Drover server is running at ");
    let cli = Drover::attach_to(target_home.path(), &url, "testdev");
    let after = cli.show(&id);
    for field in ["id", "outcome", "exit_code", "started_at", "ended_at", "device", "command"] {
        assert_eq!(after[field], before[field], "{field}");
    }
    let text = cli.ok(&["session", "tail", &id]);
    assert!(text.contains("moved with care one") && text.contains("moved with care three"), "{text}");
    let audit = cli.ok(&["audit", "export", "--since", "2000-01-01"]);
    assert!(audit.contains("an audited line"), "{audit}");
    let _ = server.kill();
    let _ = server.wait();
    if target.starts_with("postgres") {
        support::drop_database(&target);
    }
}
