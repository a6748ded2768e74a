//! A command whose output the bench reads as fast as it can (from a PTY, or from a pipe
//! like `script`'s stdout in the bare baseline), watching for markers.

use std::io::{Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use portable_pty::{CommandBuilder, PtySize};

#[derive(Default)]
struct Seen {
    bytes: u64,
    tail: Vec<u8>,
    eof: bool,
}

enum Proc {
    Pty { child: Box<dyn portable_pty::Child + Send + Sync>, _master: Box<dyn portable_pty::MasterPty + Send> },
    Piped(std::process::Child),
}

/// A running command whose output is read and counted.
pub struct PtyProc {
    seen: Arc<(Mutex<Seen>, Condvar)>,
    writer: Box<dyn Write + Send>,
    proc: Proc,
}

/// Reads `reader` on a thread of its own, counting bytes and keeping the tail.
fn read_in_background(mut reader: Box<dyn Read + Send>) -> Arc<(Mutex<Seen>, Condvar)> {
    let seen = Arc::new((Mutex::new(Seen::default()), Condvar::new()));
    let s = seen.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let (lock, cv) = &*s;
            let mut g = lock.lock().unwrap();
            g.bytes += n as u64;
            g.tail.extend_from_slice(&buf[..n]);
            let keep = g.tail.len().saturating_sub(4096);
            g.tail.drain(..keep);
            cv.notify_all();
        }
        let (lock, cv) = &*s;
        lock.lock().unwrap().eof = true;
        cv.notify_all();
    });
    seen
}

impl PtyProc {
    /// Spawns `argv` with `env` in a `cols`×`rows` PTY; output is read and counted.
    pub fn spawn(argv: &[&str], env: &[(&str, &str)], cols: u16, rows: u16) -> Result<PtyProc> {
        let pair = portable_pty::native_pty_system()
            .openpty(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 })
            .map_err(anyhow::Error::msg)?;
        let mut cmd = CommandBuilder::new(argv[0]);
        cmd.args(&argv[1..]);
        cmd.env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.cwd(std::env::current_dir()?);
        let child = pair.slave.spawn_command(cmd).map_err(anyhow::Error::msg).context("spawn in pty")?;
        drop(pair.slave);
        let reader = pair.master.try_clone_reader().map_err(anyhow::Error::msg)?;
        let writer = pair.master.take_writer().map_err(anyhow::Error::msg)?;
        let seen = read_in_background(reader);
        Ok(PtyProc { seen, writer, proc: Proc::Pty { child, _master: pair.master } })
    }

    /// Spawns `argv` with `env`, stdin empty and stdout a pipe; output is read and counted.
    pub fn spawn_piped(argv: &[&str], env: &[(&str, &str)]) -> Result<PtyProc> {
        let mut child = std::process::Command::new(argv[0])
            .args(&argv[1..])
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .with_context(|| format!("spawn {}", argv[0]))?;
        let reader = Box::new(child.stdout.take().context("stdout")?);
        let seen = read_in_background(reader);
        Ok(PtyProc { seen, writer: Box::new(std::io::sink()), proc: Proc::Piped(child) })
    }

    /// Types bytes into the PTY.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.write_all(bytes)?;
        self.writer.flush()?;
        Ok(())
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.seen.0.lock().unwrap().bytes
    }

    /// Waits until `marker` appears in output read after `after_bytes`; returns when.
    pub fn wait_for(&self, marker: &[u8], after_bytes: u64, timeout: Duration) -> Result<Instant> {
        let deadline = Instant::now() + timeout;
        let (lock, cv) = &*self.seen;
        let mut g = lock.lock().unwrap();
        loop {
            if g.bytes > after_bytes {
                let fresh = (g.bytes - after_bytes).min(g.tail.len() as u64) as usize;
                let start = g.tail.len() - fresh;
                if g.tail[start..].windows(marker.len()).any(|w| w == marker) {
                    return Ok(Instant::now());
                }
            }
            if g.eof {
                let last = &g.tail[g.tail.len().saturating_sub(400)..];
                anyhow::bail!(
                    "output ended before {:?} appeared; it ended with {:?}",
                    String::from_utf8_lossy(marker),
                    String::from_utf8_lossy(last)
                );
            }
            let now = Instant::now();
            anyhow::ensure!(now < deadline, "timed out waiting for {:?}", String::from_utf8_lossy(marker));
            g = cv.wait_timeout(g, deadline - now).unwrap().0;
        }
    }

    /// Kills the process.
    pub fn kill(&mut self) {
        match &mut self.proc {
            Proc::Pty { child, .. } => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Proc::Piped(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Drop for PtyProc {
    fn drop(&mut self) {
        self.kill();
    }
}
