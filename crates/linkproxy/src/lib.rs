//! A TCP proxy whose link can be cut and restored: a device talks to the server through
//! it, so a test or a soak run can drop the link without touching either process. In
//! front of several replicas it is their one address: each connection goes to the first
//! that accepts it, as a load balancer with failover would send it.
//! Shared by the soak benchmark and the end-to-end fault tests.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Shared {
    up: AtomicBool,
    cuts: AtomicU64,
    conns: Mutex<Vec<TcpStream>>,
}

/// The proxy; it runs until the process ends.
pub struct LinkProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

impl LinkProxy {
    /// Listens on a free loopback port and forwards each connection to `target`.
    pub fn start(target: SocketAddr) -> std::io::Result<LinkProxy> {
        LinkProxy::front(vec![target])
    }

    /// Listens on a free loopback port and forwards each connection to the first of
    /// `targets` that accepts it.
    pub fn front(targets: Vec<SocketAddr>) -> std::io::Result<LinkProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared { up: AtomicBool::new(true), cuts: AtomicU64::new(0), conns: Mutex::new(Vec::new()) });
        let s = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                // While cut, connections are dropped as they arrive.
                if !s.up.load(Ordering::SeqCst) {
                    continue;
                }
                let Some(server) = targets.iter().find_map(|t| TcpStream::connect_timeout(t, Duration::from_secs(5)).ok()) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone(), client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                {
                    // Checked again under the lock `cut` takes: a cut while this one was
                    // connecting closes it rather than missing it.
                    let mut conns = s.conns.lock().expect("conns");
                    if !s.up.load(Ordering::SeqCst) {
                        let _ = client.shutdown(Shutdown::Both);
                        let _ = server.shutdown(Shutdown::Both);
                        continue;
                    }
                    conns.retain(|c| c.peer_addr().is_ok());
                    conns.push(c3);
                    conns.push(s3);
                }
                std::thread::spawn(move || pipe(client, s2));
                std::thread::spawn(move || pipe(server, c2));
            }
        });
        Ok(LinkProxy { addr, shared })
    }

    /// The URL to give the device instead of the server's.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Cuts every connection and refuses new ones until [`LinkProxy::restore`].
    pub fn cut(&self) {
        let mut conns = self.shared.conns.lock().expect("conns");
        self.shared.up.store(false, Ordering::SeqCst);
        self.shared.cuts.fetch_add(1, Ordering::SeqCst);
        for c in conns.drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.shared.up.store(true, Ordering::SeqCst);
    }

    /// How many times the link was cut.
    pub fn cuts(&self) -> u64 {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}
