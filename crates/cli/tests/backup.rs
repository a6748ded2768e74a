//! `drover backup` end to end: a copy taken while sessions print and start and end
//! passes SQLite's integrity check, holds a moment of the live database (its counts of
//! sessions, events and output bytes lie between the source's before and after), and a
//! server started on it serves exactly what it holds; once the load stops a second copy
//! matches the source. And the refusals: a file already there, PostgreSQL (pg_dump
//! guidance, the password never shown), no database.
//!
//! The server runs on SQLite whatever the suite's database: a copy of SQLite's file is
//! what `drover backup` makes.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;
use support::*;

/// Sessions, events and bytes of output a database holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd)]
struct Counts {
    sessions: u64,
    events: u64,
    output_bytes: u64,
}

/// Counts `db` with the sqlite3 CLI (another client of the file, as an operator would).
fn counted(db: &Path) -> Counts {
    let sql = "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM events), (SELECT COALESCE(SUM(length(data)), 0) FROM output_chunks);";
    let text = sqlite(db, sql);
    let n: Vec<u64> = text.trim().split('|').map(|v| v.parse().expect("a count")).collect();
    Counts { sessions: n[0], events: n[1], output_bytes: n[2] }
}

fn sqlite(db: &Path, sql: &str) -> String {
    let out = Command::new("sqlite3").args(["-cmd", ".timeout 10000"]).arg(db).arg(sql).output().expect("sqlite3");
    assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Whether every count of `a` is at most `b`'s.
fn within(a: Counts, b: Counts) -> bool {
    a.sessions <= b.sessions && a.events <= b.events && a.output_bytes <= b.output_bytes
}

/// What a server on `url` serves, asked through its API with `token`.
fn served(url: &str, token: &str) -> Counts {
    let cli = |args: &[&str]| {
        let out = Command::new(bin()).args(args).env("DROVER_URL", url).env("DROVER_TOKEN", token).output().expect("run drover");
        assert!(out.status.success(), "drover {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let list: Value = serde_json::from_slice(&cli(&["--json", "session", "list", "--all", "--limit", "1000"])).unwrap();
    let ids: Vec<String> = list.as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect();
    let output_bytes = ids.iter().map(|id| cli(&["session", "tail", id, "--raw"]).len() as u64).sum();
    let (mut events, mut after) = (0u64, 0i64);
    loop {
        let (status, body) = http(url, "GET", &format!("/api/v1/events?after={after}&limit=1000"), Some(token), b"");
        assert_eq!(status, 200, "{body}");
        let page: Vec<Value> = serde_json::from_str(&body).unwrap();
        let Some(last) = page.last() else { break };
        after = last["seq"].as_i64().expect("events carry their seq");
        events += page.len() as u64;
    }
    Counts { sessions: ids.len() as u64, events, output_bytes }
}

/// Sessions that print without pause until stopped, and a stream of short ones that
/// print 2000 lines each (every start and end is an event), until `stop`.
struct Load {
    printers: Vec<String>,
    stop: Arc<AtomicBool>,
    starter: Option<std::thread::JoinHandle<Vec<String>>>,
}

const PRINT_FOREVER: &str = "while :; do for i in $(seq 1 2000); do echo line $i; done; done";
const PRINT_2000: &str = "for i in $(seq 1 2000); do echo line $i; done";

impl Load {
    fn start(d: &Drover) -> Load {
        let printers = (0..3).map(|_| d.start(&["bash", "-c", PRINT_FOREVER])).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let (home, device, flag) = (d.home.path().to_path_buf(), d.device.clone(), Arc::clone(&stop));
        let starter = std::thread::spawn(move || {
            let mut ids = Vec::new();
            while !flag.load(Ordering::SeqCst) && ids.len() < 300 {
                let out = Command::new(bin())
                    .args(["session", "start", "--device", &device, "--", "bash", "-c", PRINT_2000])
                    .env("DROVER_HOME", &home)
                    .env_remove("DROVER_URL")
                    .env_remove("DROVER_TOKEN")
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                ids.push(String::from_utf8(out.stdout).unwrap().trim().to_string());
            }
            ids
        });
        Load { printers, stop, starter: Some(starter) }
    }

    /// Stops it all and waits until every session has ended.
    fn finish(mut self, d: &Drover) {
        self.stop.store(true, Ordering::SeqCst);
        let started = self.starter.take().unwrap().join().unwrap();
        for id in &self.printers {
            d.ok(&["session", "stop", id]);
        }
        for id in self.printers.iter().chain(&started) {
            d.wait_ended(id, secs(60));
        }
    }
}

#[test]
fn a_backup_under_write_load_restores_to_exactly_what_it_holds() {
    let home = tempfile::tempdir().unwrap();
    let source = home.path().join("drover.db");
    let sqlite_only = vec![("DROVER_DATABASE".to_string(), format!("sqlite:{}", source.display()))];
    let d = Drover::up_env(home, 200, test_sandbox_args(), sqlite_only);
    let out_dir = tempfile::tempdir().unwrap();
    let copy = out_dir.path().join("backup.db");

    let load = Load::start(&d);
    wait_until("sessions printing", secs(60), || {
        let c = counted(&source);
        (c.sessions >= 6 && c.output_bytes > 100_000).then_some(())
    });
    let before = counted(&source);
    let printed = d.ok(&["backup", "--out", copy.to_str().unwrap()]);
    let after = counted(&source);
    assert!(printed.contains("backed up"), "{printed}");
    // Something was written while the copy was made, or the test proves nothing.
    assert!(before != after, "the load stood still: {before:?}");
    load.finish(&d);

    assert_eq!(sqlite(&copy, "PRAGMA integrity_check;").trim(), "ok");
    let held = counted(&copy);
    eprintln!("before the backup {before:?}, in it {held:?}, after it {after:?}");
    assert!(within(before, held) && within(held, after), "the copy {held:?} is not between {before:?} and {after:?}");
    assert!(held.sessions > 0 && held.events > 0 && held.output_bytes > 0, "{held:?}");

    // A server started on the copy, placed as the database of a new home, serves exactly
    // what the copy holds (the member token is in the copy too).
    let restored = tempfile::tempdir().unwrap();
    std::fs::copy(&copy, restored.path().join("drover.db")).unwrap();
    let mut server = spawn_drover_on(restored.path(), None, &["server", "--listen", "127.0.0.1:0"]);
    let url = read_url(&mut server, "Drover server is running at ");
    let seen = served(&url, &d.token());
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(seen, held);

    // Once the load has stopped, a copy is the source exactly.
    let mut tries = 0;
    loop {
        let again = out_dir.path().join(format!("quiet-{tries}.db"));
        let before = counted(&source);
        d.ok(&["backup", "--out", again.to_str().unwrap()]);
        if counted(&source) == before {
            assert_eq!(counted(&again), before);
            break;
        }
        tries += 1;
        assert!(tries < 10, "the source never stood still");
    }
    // No half-written copy is left beside them.
    let names: Vec<String> =
        std::fs::read_dir(out_dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains("partial")), "{names:?}");
}

#[test]
fn a_backup_refuses_a_file_already_there_postgresql_and_a_missing_database() {
    let home = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let drover = |args: &[&str]| {
        Command::new(bin()).args(args).env("DROVER_HOME", home.path()).env_remove("DROVER_DATABASE").output().expect("run drover")
    };

    // No database: said so, and nothing written.
    let none = out_dir.path().join("none.db");
    let out = drover(&["backup", "--out", none.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("there is no database at") && err.contains("drover.db"), "{err}");
    assert!(!none.exists());

    // A file already there is never written over.
    assert!(drover(&["migrate"]).status.success());
    let taken = out_dir.path().join("taken.db");
    std::fs::write(&taken, b"keep me").unwrap();
    let out = drover(&["backup", "--out", taken.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&taken).unwrap(), b"keep me");
    // A directory that is not there is said so too.
    let out = drover(&["backup", "--out", out_dir.path().join("no/such/b.db").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a directory"), "{}", String::from_utf8_lossy(&out.stderr));

    // PostgreSQL: the pg_dump and pg_restore to run instead, without the password.
    let dump = out_dir.path().join("pg.dump");
    let out = drover(&["backup", "--database", "postgres://drover:s3cret@127.0.0.1:5432/drover", "--out", dump.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pg_dump --format=custom") && err.contains("pg_restore"), "{err}");
    assert!(err.contains("postgres://drover@127.0.0.1:5432/drover"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    assert!(!dump.exists());

    // And the database is copied.
    let fine = out_dir.path().join("fine.db");
    let out = drover(&["--json", "backup", "--out", fine.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["file"], fine.to_str().unwrap());
    assert!(v["schema_version"].as_i64().unwrap() > 0, "{v}");
    assert_eq!(sqlite(&fine, "SELECT COUNT(*) > 0 FROM _sqlx_migrations;").trim(), "1");
}
