//! A webhook receiver for the tests (`webhook_receiver.py`, run with the Python test
//! tools in harnesses/.venv): it verifies every delivery with the Standard Webhooks
//! reference library and logs each request as a JSON line.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// A running receiver; stopped when dropped.
pub struct Receiver {
    child: Child,
    /// Where to send deliveries.
    pub url: String,
    /// Its request log (JSON lines).
    pub log: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../harnesses/.venv/bin/python");
    assert!(p.exists(), "the Python test tools are not installed: run scripts/test (it makes harnesses/.venv)");
    p
}

/// Starts the receiver on `port` (0: any), failing its first `fail_first` requests;
/// `mode` "gone" answers 410 to everything, "redirect" answers 302.
pub fn receiver(dir: &Path, port: u16, secrets: &Path, fail_first: u32, mode: &str) -> Receiver {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/webhook_receiver.py");
    let log = dir.join(format!("log-{port}-{fail_first}-{mode}.jsonl"));
    let mut cmd = Command::new(python());
    cmd.arg(script).arg(port.to_string()).arg(&log).arg(secrets).arg(fail_first.to_string()).arg(mode);
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("python");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line.trim().parse().expect("the receiver's port");
    Receiver { child, url: format!("http://127.0.0.1:{port}/hook"), log }
}

/// The requests logged so far.
pub fn entries(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}
