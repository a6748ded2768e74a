//! End-to-end: several `drover server` replicas on one PostgreSQL database, behind one
//! address. The device's link is on one replica; the CLI and a live viewer use another;
//! the device's replica is killed with SIGKILL mid-stream. Nothing is lost or doubled,
//! input typed on the other replica reaches the program, a resize made on the link's
//! replica reaches viewers on the other, viewers who can type are counted on both
//! (the shim leaves terminal queries to them), and the background monitors
//! move to the surviving replica within seconds. Runs in the PostgreSQL pass of the test
//! command (`DROVER_TEST_DATABASE`, see scripts/postgres).
#![allow(clippy::too_many_lines)] // an end-to-end test reads best as one scenario

mod support;

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use support::proxy::LinkProxy;
use support::term::Attached;
use support::{read_url, secs, spawn_drover_on, wait_until, Drover};

/// A `drover server` replica on `db`, in `home`, with short monitor leases.
fn replica(home: &Path, db: &str) -> (Child, String) {
    let mut child = spawn_drover_on(home, Some(db), &["server", "--listen", "127.0.0.1:0", "--stop-grace", "1", "--lease-secs", "2"]);
    let url = read_url(&mut child, "Drover server is running at ");
    (child, url)
}

/// Runs a query on `db` with psql, returning its rows (fields split by `|`).
fn psql(db: &str, sql: &str) -> Vec<Vec<String>> {
    let out = Command::new("psql").args(["-XAtq", db, "-c", sql]).output().expect("psql (postgresql-client)");
    assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| l.split('|').map(str::to_string).collect()).collect()
}

/// Who holds each monitor's lease now.
fn lease_holders(db: &str) -> Vec<(String, String)> {
    let now = drover_store::now();
    psql(db, &format!("SELECT name, holder FROM leases WHERE expires_at > '{now}' ORDER BY name"))
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect()
}

fn addr(url: &str) -> std::net::SocketAddr {
    url.trim_start_matches("http://").parse().expect("a replica's address")
}

/// The processes a test started, killed (with the device's sessions) when it ends,
/// passed or not.
struct Procs {
    children: Vec<Option<Child>>,
    device_home: tempfile::TempDir,
    /// The replicas' database, dropped at the end.
    db: String,
}

impl Procs {
    fn add(&mut self, child: Child) -> usize {
        self.children.push(Some(child));
        self.children.len() - 1
    }

    /// `kill -9` process `i`.
    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            self.kill(i);
        }
        support::kill_sessions(self.device_home.path());
        support::drop_database(&self.db);
    }
}

#[test]
fn replicas_share_devices_viewers_and_monitors_and_survive_a_killed_replica() {
    let Some(server) = std::env::var("DROVER_TEST_DATABASE").ok().filter(|s| !s.is_empty()) else {
        eprintln!("SKIPPED: replicas need PostgreSQL; the test command runs this in its PostgreSQL pass (DROVER_TEST_DATABASE)");
        return;
    };
    let db = format!("{}/drover_replicas_{}", server.trim_end_matches('/'), std::process::id());
    support::drop_database(&db);
    let (home_b, home_a) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut procs = Procs { children: Vec::new(), device_home: tempfile::tempdir().unwrap(), db: db.clone() };

    // B starts first and takes every monitor's lease.
    let (b, url_b) = replica(home_b.path(), &db);
    let b = procs.add(b);
    let held = wait_until("replica B holds the monitors", secs(20), || {
        let h = lease_holders(&db);
        // stale, scheduler, webhooks, retention, push, screens
        (h.len() == 6).then_some(h)
    });
    let b_name = held[0].1.clone();
    assert!(held.iter().all(|(_, holder)| *holder == b_name), "one replica holds them all: {held:?}");
    let (a, url_a) = replica(home_a.path(), &db);
    procs.add(a);
    std::thread::sleep(Duration::from_secs(3));
    assert!(lease_holders(&db).iter().all(|(_, holder)| *holder == b_name), "monitors run once: A does not take B's leases");

    // One address in front of both (B first): the device's link lands on B.
    let front = LinkProxy::front(vec![addr(&url_b), addr(&url_a)]).unwrap();
    let cli = Drover::attach_to(home_a.path(), &url_a, "dev");
    let token = cli.json(&["device", "add", "dev", "--slots", "4"])["enrollment_token"].as_str().unwrap().to_string();
    let front_url = front.url();
    let mut device_args =
        vec!["device", "--server", &front_url, "--token", &token, "--name", "dev", "--slots", "4", "--heartbeat-secs", "1"];
    let allowance = support::test_sandbox_args();
    device_args.extend(allowance.iter().map(String::as_str));
    let device = spawn_drover_on(procs.device_home.path(), None, &device_args);
    procs.add(device);
    cli.wait_device("dev", true);
    let links = psql(&db, "SELECT replica FROM device_links");
    assert_eq!(links, [[b_name.clone()]], "the device's link is on B");

    // Started from A (the start goes through B's mailbox), a program that prints a known
    // stream and keeps its own copy; another that echoes what it is sent.
    let work = tempfile::tempdir().unwrap();
    let copy = work.path().join("tee.out");
    let script = format!(
        "i=0; while [ $i -lt 6000 ]; do i=$((i+1)); echo \"line $i of the stream\"; \
         [ $((i % 20)) -eq 0 ] && sleep 0.02; done | tee {}; echo END-OF-STREAM; sleep 600",
        copy.display()
    );
    let streamer = cli.start(&["sh", "-c", &script]);
    let echo = cli.start(&["cat"]);

    // A viewer on A sees the live screen of a session on B's device, and what it types
    // reaches the program through B.
    let mut typing = Attached::start(&cli, &echo, &[], 80, 24);
    typing.wait_for("[attached to", secs(20));
    typing.type_bytes(b"typed on replica A\r");
    cli.wait_text(&echo, "typed on replica A\ntyped on replica A", secs(20));
    typing.wait_for("typed on replica A", secs(20));
    cli.ok(&["session", "input", &echo, "sent through A's Send path"]);
    cli.wait_text(&echo, "sent through A's Send path\nsent through A's Send path", secs(20));
    // A viewer on B (the link's replica) resizes the terminal: A, which follows the
    // session from the database, learns the size the program has now.
    let on_b = Drover::attach_to(home_a.path(), &url_b, "dev");
    let config = on_b.home.path().join("client.json");
    let mut client: serde_json::Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    client["url"] = url_b.clone().into();
    std::fs::write(&config, client.to_string()).unwrap();
    let wide = Attached::start(&on_b, &echo, &[], 132, 40);
    wide.wait_for("[attached to", secs(20));
    wait_until("A hears of the resize made on B", secs(20), || {
        let s = cli.show(&echo);
        (s["cols"] == 132 && s["rows"] == 40).then_some(())
    });
    drop(wide);

    // Who can type is counted on every replica: with a viewer typing on A and a
    // read-only one on B (the link's replica), the shim leaves terminal queries to the
    // one who types. The program asks for the terminal's attributes and prints the
    // first answer it reads: the shim's would come at once, the viewer's only when typed.
    let asker = cli.start(&[
        "bash",
        "-c",
        "stty -icanon -echo; IFS= read -r go; printf '\\033[c'; IFS= read -r -d c reply; echo \"GOT:${reply:1}:END\"; sleep 600",
    ]);
    let mut asking = Attached::start(&cli, &asker, &[], 80, 24);
    asking.wait_for("[attached to", secs(20));
    let reading = Attached::start(&on_b, &asker, &["--read-only"], 80, 24);
    reading.wait_for("[attached to", secs(20));
    for (on, name) in [(&cli, "A"), (&on_b, "B")] {
        wait_until(&format!("replica {name} counts the viewers on both"), secs(20), || (on.show(&asker)["attached"] == 2).then_some(()));
    }
    asking.type_bytes(b"go\r");
    asking.wait_for("\x1b[c", secs(20));
    asking.type_bytes(b"\x1b[?9;9c");
    let got = cli.wait_text(&asker, ":END", secs(20));
    assert!(got.contains("GOT:[?9;9:END"), "the program's query was answered by the shim, not the viewer typing on A: {got:?}");
    let watching = Attached::start(&cli, &streamer, &["--read-only"], 100, 30);
    watching.wait_for("of the stream", secs(20));

    // Kill -9 B mid-stream: the device reconnects through the front address to A.
    cli.wait_text(&streamer, "line 1000 of", secs(60));
    procs.kill(b);
    let moved = wait_until("the monitors move to A", secs(15), || {
        let h = lease_holders(&db);
        (h.len() == 6 && h.iter().all(|(_, holder)| *holder != b_name)).then_some(h)
    });
    assert_eq!(moved.iter().map(|(_, h)| h).collect::<std::collections::HashSet<_>>().len(), 1, "{moved:?}");
    wait_until("B's viewer no longer counts once B is gone", secs(20), || (cli.show(&asker)["attached"] == 1).then_some(()));
    cli.wait_text(&streamer, "END-OF-STREAM", secs(90));
    watching.wait_for("END-OF-STREAM", secs(30));
    assert_ne!(psql(&db, "SELECT replica FROM device_links"), [[b_name.clone()]], "the link moved to A");

    // Every byte the program wrote is stored once, in order.
    let stored = cli.raw(&streamer);
    let text = String::from_utf8_lossy(&stored).replace("\r\n", "\n");
    let expected = std::fs::read_to_string(&copy).unwrap();
    let got = text.split("END-OF-STREAM").next().unwrap();
    assert_eq!(got.len(), expected.len(), "stored output differs in length from what the program wrote");
    assert!(got == expected, "stored output differs from what the program wrote");

    // Input still reaches the program, now through A's own link.
    cli.ok(&["session", "input", &echo, "after the failover"]);
    cli.wait_text(&echo, "after the failover\nafter the failover", secs(20));
    cli.ok(&["session", "stop", &streamer]);
    cli.ok(&["session", "stop", &echo]);
    cli.ok(&["session", "stop", &asker]);
    drop(typing);
    drop(asking);
    drop(reading);
    drop(watching);
}
