//! The checks that ask the server: whether it answers and which version it runs, whether
//! its certificate is trusted (through the same TLS setup as every other command, so
//! `--ca-cert` and `DROVER_CA_CERT` count), how far this machine's clock is from its,
//! and how many slots this machine's device has free.

use std::path::Path;
use std::time::{Duration, SystemTime};

use drover_core::doctor::{judge_clock, judge_slots, judge_versions, Finding};
use rustls::CertificateError;

use crate::home::{read_json, ClientConfig, DeviceCredentialFile};

/// How long the server has to answer each request.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The server to check against, and what this machine holds for it.
struct Target {
    url: String,
    /// A member token (`DROVER_TOKEN`, or the one `drover up` saved) to ask with.
    token: Option<String>,
    /// The device this machine runs for that server, if any.
    device: Option<String>,
    /// The fingerprint of the certificate this device last saw the server present.
    known_certificate: Option<String>,
}

/// What a device daemon saved when it enrolled (`device-daemon/credential.json`), as far
/// as the doctor reads it.
#[derive(serde::Deserialize)]
struct Enrolled {
    server: String,
    name: String,
}

/// Finds the server: `--server`, else `DROVER_URL`, else the one this machine's device
/// enrolled with, else the one `drover up` in this home runs.
fn target(flag: Option<&str>, home: Option<&Path>) -> Option<Target> {
    let read = |name: &str| home.map(|h| h.join(name));
    let client = read("client.json").and_then(|p| read_json::<ClientConfig>(&p));
    let enrolled = read("device-daemon/credential.json").and_then(|p| read_json::<Enrolled>(&p));
    let local = read("device.json").and_then(|p| read_json::<DeviceCredentialFile>(&p));
    let env_url = std::env::var("DROVER_URL").ok().filter(|u| !u.is_empty());
    let url = flag
        .map(str::to_string)
        .or(env_url)
        .or_else(|| enrolled.as_ref().map(|e| e.server.clone()))
        .or_else(|| client.as_ref().map(|c| c.url.clone()))?;
    let url = url.trim_end_matches('/').to_string();
    let same = |u: &str| u.trim_end_matches('/') == url;
    let client = client.filter(|c| same(&c.url));
    let enrolled = enrolled.filter(|e| same(&e.server));
    let token = std::env::var("DROVER_TOKEN").ok().filter(|t| !t.is_empty()).or_else(|| client.as_ref().map(|c| c.token.clone()));
    let known_certificate = enrolled
        .as_ref()
        .and_then(|_| std::fs::read_to_string(read("device-daemon/server-certificate")?).ok())
        .map(|k| k.trim().to_string());
    let device = enrolled.map(|e| e.name).or_else(|| local.filter(|_| client.is_some()).map(|l| l.name));
    Some(Target { url, token, device, known_certificate })
}

/// Every server check: `server`, `tls`, `clock`, `slots`.
pub async fn checks(flag: Option<&str>, home: Option<&Path>) -> Vec<Finding> {
    let Some(target) = target(flag, home) else {
        return vec![
            Finding::warn(
                "server",
                "no server is known on this machine",
                "pass --server URL, or enroll this device first (drover device --server URL --token TOKEN)",
            ),
            Finding::skip("tls", "no server to check"),
            Finding::skip("clock", "no server to compare with"),
            Finding::skip("slots", "no server to ask"),
        ];
    };
    if !matches!(reqwest::Url::parse(&target.url).map(|u| u.scheme().to_string()).as_deref(), Ok("http" | "https")) {
        let detail = format!("`{}` is not an http:// or https:// URL", target.url);
        return vec![Finding::fail("server", detail, "pass --server https://HOST:PORT (the URL the server prints when it starts)")];
    }
    let http = match http_client() {
        Ok(http) => http,
        Err(e) => {
            let fix = "point --ca-cert (or DROVER_CA_CERT) at a readable PEM file with the CA's certificate";
            return vec![Finding::skip("server", "not asked: TLS could not be set up"), Finding::fail("tls", e, fix)];
        }
    };
    let before = SystemTime::now();
    let sent = http.get(format!("{}/api/v1/health", target.url)).send().await;
    let after = SystemTime::now();
    match sent {
        Ok(resp) => reached(&target, &http, resp, before, after).await,
        Err(e) => unreached(&target, &e),
    }
}

/// An HTTP client that trusts what every other command of this process trusts.
fn http_client() -> Result<reqwest::Client, String> {
    let tls = crate::client::tls_config().map_err(|e| e.to_string())?;
    reqwest::Client::builder().use_preconfigured_tls((*tls).clone()).tls_info(true).timeout(TIMEOUT).build().map_err(|e| e.to_string())
}

/// The findings when the health request got no answer.
fn unreached(target: &Target, e: &reqwest::Error) -> Vec<Finding> {
    let url = &target.url;
    let not_asked = [Finding::skip("clock", "the server was not reached"), Finding::skip("slots", "the server was not reached")];
    if let Some(tls) = drover_tls::explain::find(e) {
        let fix = tls_fix(tls);
        let mut out = vec![
            Finding::fail("server", format!("{url} was reached, but not securely (see tls)"), fix),
            Finding::fail("tls", drover_tls::explain::describe(tls), fix),
        ];
        out.extend(not_asked);
        return out;
    }
    let server = if e.is_timeout() {
        Finding::fail(
            "server",
            format!("{url} did not answer within {} s", TIMEOUT.as_secs()),
            "check the server is running and that nothing on the way drops the traffic",
        )
    } else {
        Finding::fail(
            "server",
            format!("cannot reach {url}: {}", crate::client::connection_trouble(e)),
            "start the server (drover up, drover server, or its service), or check the URL, its port and the firewall",
        )
    };
    let mut out = vec![server, Finding::skip("tls", "the server was not reached")];
    out.extend(not_asked);
    out
}

/// What to do about a TLS failure, in one line.
fn tls_fix(e: &rustls::Error) -> &'static str {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "trust the CA that signed the server's certificate: --ca-cert FILE or DROVER_CA_CERT=FILE (its PEM certificate)"
        }
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }) => {
            "use the host name the server's certificate was issued for in the URL, or reissue the certificate for this one"
        }
        rustls::Error::InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. }) => {
            "renew the server's certificate (the server picks up a new --tls-cert file by itself)"
        }
        rustls::Error::InvalidCertificate(CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. }) => {
            "set this machine's clock right (NTP)"
        }
        rustls::Error::InvalidMessage(_) => "use http:// for a server started without --tls-cert, or the port it serves TLS on",
        _ => "check the server's certificate (--tls-cert) and what this machine trusts (--ca-cert, DROVER_CA_CERT)",
    }
}

/// The findings when the server answered.
async fn reached(target: &Target, http: &reqwest::Client, resp: reqwest::Response, before: SystemTime, after: SystemTime) -> Vec<Finding> {
    let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let server = match resp.status() {
        s if s.is_success() => judge_versions(&target.url, header(drover_api::VERSION_HEADER).as_deref(), env!("CARGO_PKG_VERSION")),
        s => Finding::fail(
            "server",
            format!("{} answered {s} to /api/v1/health: is it a Drover server?", target.url),
            "check the URL names the Drover server (or the proxy in front of it)",
        ),
    };
    let clock = match header("date") {
        Some(date) => clock(&date, before, after),
        None => Finding::skip("clock", "the server's answer has no Date header"),
    };
    let tls = tls_finding(target, &resp);
    vec![server, tls, clock, slots(target, http).await]
}

/// Whether the way to the server is protected, and by which trust.
fn tls_finding(target: &Target, resp: &reqwest::Response) -> Finding {
    let url = reqwest::Url::parse(&target.url).ok();
    if url.as_ref().is_some_and(|u| u.scheme() == "https") {
        let seen = resp.extensions().get::<reqwest::tls::TlsInfo>().and_then(|i| i.peer_certificate()).map(drover_tls::fingerprint);
        if let (Some(seen), Some(known)) = (&seen, &target.known_certificate) {
            if seen != known {
                return Finding::warn(
                    "tls",
                    format!("the server's certificate ({seen}) is not the one this device last saw ({known})"),
                    "if nobody renewed it on purpose, stop the device: whoever holds that certificate gets its credential and its runs' output",
                );
            }
        }
        let by = match crate::client::trust().ca_cert {
            Some(ca) => format!("the CA in {}", ca.display()),
            None => "this machine's trusted roots".into(),
        };
        return Finding::ok("tls", format!("the server's certificate is valid for its name and vouched for by {by}"));
    }
    let host = url.as_ref().and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string())).unwrap_or_default();
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        return Finding::ok("tls", "plain http on loopback: nothing leaves this machine");
    }
    Finding::warn(
        "tls",
        format!("plain http to {host}: tokens, keystrokes and output cross the network readable (unless a TLS proxy is on the way)"),
        "serve https (drover server --tls-cert FILE --tls-key FILE), or reach the server through a TLS proxy",
    )
}

/// This machine's clock against the server's `Date` (whole seconds), read between
/// `before` and `after`.
fn clock(date: &str, before: SystemTime, after: SystemTime) -> Finding {
    let Ok(theirs) = chrono::DateTime::parse_from_rfc2822(date) else {
        return Finding::skip("clock", format!("the server's Date header `{date}` cannot be read"));
    };
    let secs = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    let (before, after) = (secs(before), secs(after));
    // The server's clock read somewhere in the second it names, at some time while the
    // request was on its way.
    let server = theirs.timestamp() as f64 + 0.5;
    judge_clock((before + after) / 2.0 - server, 0.5 + (after - before) / 2.0)
}

/// This machine's device's free slots, asked with the member token it holds.
async fn slots(target: &Target, http: &reqwest::Client) -> Finding {
    let Some(device) = &target.device else {
        return Finding::skip("slots", "no device of this machine is enrolled with this server");
    };
    let Some(token) = &target.token else {
        return Finding::skip("slots", format!("device `{device}`: no member token here to ask with (drover login, or DROVER_TOKEN)"));
    };
    let resp = match http.get(format!("{}/api/v1/devices", target.url)).bearer_auth(token).send().await {
        Ok(resp) => resp,
        Err(e) => return Finding::skip("slots", format!("asking for the devices failed: {}", crate::client::connection_trouble(&e))),
    };
    match resp.status().as_u16() {
        200 => {}
        401 => return Finding::warn("slots", "the server refused this machine's member token", "sign in again: drover login"),
        403 => return Finding::skip("slots", "this token may not list the devices (an agent's or a device's)"),
        s => return Finding::skip("slots", format!("the server answered {s} to the device list")),
    }
    let Ok(devices) = resp.json::<Vec<drover_api::DeviceView>>().await else {
        return Finding::skip("slots", "the server's device list could not be read");
    };
    match devices.iter().find(|d| &d.name == device) {
        Some(d) if d.revoked_at.is_some() => Finding::fail(
            "slots",
            format!("device `{device}` was revoked: the server refuses it"),
            format!("register it again (drover device add {device}) and enroll with the new token"),
        ),
        Some(d) => judge_slots(device, d.slots, d.live_sessions, d.connected),
        None => Finding::fail("slots", format!("the server has no device `{device}`"), format!("register it: drover device add {device}")),
    }
}
