//! A `drover session attach` running in a real PTY, driven like a person at a terminal.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize};

use super::{bin, Drover};

/// An attach client in its own PTY.
pub struct Attached {
    pub output: Arc<Mutex<Vec<u8>>>,
    /// Set once the reader has read everything (the client and its terminal are gone).
    drained: Arc<std::sync::atomic::AtomicBool>,
    /// While set, nothing is read from the terminal (a viewer's screen that has stalled).
    paused: Arc<std::sync::atomic::AtomicBool>,
    writer: Box<dyn Write + Send>,
    master: Box<dyn portable_pty::MasterPty + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Attached {
    /// Runs `drover session attach ID [extra…]` in a `cols`×`rows` PTY.
    pub fn start(d: &Drover, id: &str, extra: &[&str], cols: u16, rows: u16) -> Attached {
        Attached::start_in(d.home.path(), &[], id, extra, (cols, rows))
    }

    /// [`Attached::start`] with `home` as `DROVER_HOME` and more environment.
    pub fn start_in(home: &std::path::Path, env: &[(&str, &str)], id: &str, extra: &[&str], (cols, rows): (u16, u16)) -> Attached {
        let pair = portable_pty::native_pty_system().openpty(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }).expect("openpty");
        let mut cmd = CommandBuilder::new(bin());
        cmd.args(["session", "attach", id]);
        cmd.args(extra);
        cmd.env("DROVER_HOME", home);
        cmd.env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).expect("spawn attach");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        let output = Arc::new(Mutex::new(Vec::new()));
        let out = output.clone();
        let drained = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = drained.clone();
        let paused = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hold = paused.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            loop {
                while hold.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let Ok(n) = reader.read(&mut buf) else { break };
                if n == 0 {
                    break;
                }
                out.lock().unwrap().extend_from_slice(&buf[..n]);
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        Attached { output, drained, paused, writer, master: pair.master, child }
    }

    /// The attach process's id.
    pub fn pid(&self) -> u32 {
        self.child.process_id().expect("attach's pid")
    }

    /// Stops reading the client's terminal (`true`), as a stalled screen would, or reads
    /// it again; reading stops after the read under way.
    pub fn pause_reading(&self, paused: bool) {
        self.paused.store(paused, std::sync::atomic::Ordering::Release);
    }

    /// Types bytes.
    pub fn type_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }

    /// Resizes the attach client's terminal (it gets SIGWINCH).
    pub fn resize(&self, cols: u16, rows: u16) {
        self.master.resize(PtySize { rows, cols, pixel_width: 0, pixel_height: 0 }).unwrap();
    }

    /// Everything the client printed so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// Waits until the client's output contains `needle`.
    pub fn wait_for(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.text().contains(needle) {
            assert!(Instant::now() < deadline, "attach output never contained {needle:?}: {:?}", self.text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the client to exit; returns whether it succeeded.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader collect the client's last words before anyone reads them.
                let drain_deadline = Instant::now() + Duration::from_secs(5);
                while !self.drained.load(std::sync::atomic::Ordering::Acquire) && Instant::now() < drain_deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                if !status.success() {
                    eprintln!("attach exited with {status:?}; it printed: {:?}", self.text());
                }
                return status.success();
            }
            assert!(Instant::now() < deadline, "attach did not exit: {:?}", self.text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// A session's terminal WebSocket opened by hand, as `d`'s member: session `id`, with
/// `query` after the `?` (empty for none), for tests that speak the viewer protocol.
pub async fn terminal_socket(d: &Drover, id: &str, query: &str) -> TerminalSocket {
    terminal_socket_as(d, &d.token(), id, query).await
}

/// A terminal WebSocket opened by hand.
pub type TerminalSocket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// [`terminal_socket`] with `token`.
pub async fn terminal_socket_as(d: &Drover, token: &str, id: &str, query: &str) -> TerminalSocket {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!("{}/api/v1/sessions/{id}/terminal?{query}", d.url.replace("http://", "ws://"));
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    tokio_tungstenite::connect_async(req).await.expect("the terminal's WebSocket").0
}
