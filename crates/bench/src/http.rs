//! A minimal blocking HTTP/1.1 client for the benchmarks (one connection per request),
//! so request timings include nothing but the server and loopback.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::drover::Up;
use crate::median;

/// The server of a `drover up`, with its member token.
pub struct Client {
    addr: String,
    token: String,
}

impl Client {
    /// The client `up` wrote to its home.
    pub fn for_up(up: &Up) -> Result<Client> {
        let c: serde_json::Value = serde_json::from_slice(&std::fs::read(up.home.path().join("client.json"))?)?;
        let url = c["url"].as_str().context("url")?;
        Ok(Client { addr: url.trim_start_matches("http://").to_string(), token: c["token"].as_str().context("token")?.into() })
    }

    fn request(&self, method: &str, path: &str, body: Option<&serde_json::Value>) -> Result<Vec<u8>> {
        let mut s = TcpStream::connect(&self.addr)?;
        s.set_nodelay(true)?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        )?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp)?;
        let head_end = resp.windows(4).position(|w| w == b"\r\n\r\n").context("no HTTP head")?;
        let status = String::from_utf8_lossy(&resp[..head_end.min(12)]).to_string();
        if !status.starts_with("HTTP/1.1 20") {
            bail!("{method} {path}: {}", String::from_utf8_lossy(&resp));
        }
        Ok(resp[head_end + 4..].to_vec())
    }

    /// One GET; returns the body (fails unless 2xx).
    pub fn get(&self, path: &str) -> Result<Vec<u8>> {
        self.request("GET", path, None)
    }

    /// One POST of JSON; returns the body (fails unless 2xx).
    pub fn post(&self, path: &str, body: &serde_json::Value) -> Result<Vec<u8>> {
        self.request("POST", path, Some(body))
    }

    /// The median time of `repeats` GETs of `path`, in milliseconds.
    pub fn time(&self, path: &str, repeats: usize) -> Result<f64> {
        let mut t = Vec::with_capacity(repeats);
        for _ in 0..repeats {
            let t0 = Instant::now();
            self.get(path)?;
            t.push(t0.elapsed().as_secs_f64() * 1000.0);
        }
        Ok(median(&mut t))
    }
}
