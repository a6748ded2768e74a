//! The HTTP client the session commands use, and how it finds the server and its
//! credential: `DROVER_URL` / `DROVER_TOKEN`, else what `up` wrote in `$DROVER_HOME`.

use anyhow::{anyhow, bail, Context, Result};
use drover_api::ErrorBody;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::home::{self, ClientConfig};

/// What every connection of this process trusts (`--ca-cert`, `DROVER_CA_CERT`, the
/// system's roots), set once from the command line.
static TRUST: std::sync::OnceLock<drover_tls::trust::Trust> = std::sync::OnceLock::new();

/// Sets what this process's connections trust (from `--ca-cert`).
pub fn set_trust(trust: drover_tls::trust::Trust) {
    let _ = TRUST.set(trust);
}

/// What this process's connections trust.
pub fn trust() -> drover_tls::trust::Trust {
    TRUST.get().cloned().unwrap_or_else(|| drover_tls::trust::Trust::new(None))
}

/// The TLS client configuration of this process's connections (the system's roots are
/// read once per process, however many connections it makes).
pub fn tls_config() -> Result<std::sync::Arc<rustls::ClientConfig>> {
    static CONFIG: std::sync::OnceLock<std::result::Result<std::sync::Arc<rustls::ClientConfig>, String>> = std::sync::OnceLock::new();
    CONFIG.get_or_init(|| trust().client_config().map_err(|e| e.to_string())).clone().map_err(|e| anyhow!("setting up TLS: {e}"))
}

/// An HTTP client that trusts what this process trusts.
fn http_client() -> Result<reqwest::Client> {
    reqwest::Client::builder().use_preconfigured_tls((*tls_config()?).clone()).tls_info(true).build().context("building the HTTP client")
}

/// A connection failure as people act on it: a certificate problem said as such, else
/// whether the server is running at all.
pub fn unreachable(url: &str, e: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    match drover_tls::explain::tls_problem(e) {
        Some(problem) => anyhow!("cannot reach the Drover server at {url} securely: {problem}"),
        None => anyhow!("cannot reach the Drover server at {url}: is `drover up` running?"),
    }
}

/// A request that failed: worth trying again, or not.
#[derive(Debug)]
pub enum Attempt {
    /// The connection failed or dropped, or the server was not ready: what happened.
    Retry(String),
    /// The server's answer, which trying again would not change.
    Fail(anyhow::Error),
}

/// A dropped or refused connection, said briefly (the innermost cause).
pub fn connection_trouble(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &(dyn std::error::Error + 'static) = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

/// A configured API client.
pub struct Client {
    /// The server's base URL.
    pub url: String,
    /// The bearer token.
    pub token: String,
    http: reqwest::Client,
}

impl Client {
    /// Resolves the server and credential.
    pub fn from_env() -> Result<Client> {
        // Inside an agent's run, only the run's own credential is used: never the
        // owner's `client.json` from the device's home.
        let in_run = std::env::var_os("DROVER_SESSION").is_some_and(|s| !s.is_empty());
        let file = if in_run { None } else { home::home().ok().and_then(|h| home::read_json::<ClientConfig>(&h.join("client.json"))) };
        let url = std::env::var("DROVER_URL").ok().filter(|s| !s.is_empty()).or_else(|| file.as_ref().map(|f| f.url.clone()));
        let token = std::env::var("DROVER_TOKEN").ok().filter(|s| !s.is_empty()).or_else(|| file.as_ref().map(|f| f.token.clone()));
        let (Some(url), Some(token)) = (url, token) else {
            if in_run {
                bail!("inside a run, drover uses only the run's own credential (DROVER_URL and DROVER_TOKEN, given to an agent's task runs); this session has none");
            }
            let where_ = home::home().map(|h| h.display().to_string()).unwrap_or_else(|_| "$DROVER_HOME".into());
            bail!("no server configured: run `drover up` (it writes {where_}/client.json), or set DROVER_URL and DROVER_TOKEN");
        };
        Ok(Client { url: url.trim_end_matches('/').to_string(), token, http: http_client()? })
    }

    /// A client for `url` with no credential yet (`drover login`).
    pub fn anonymous(url: &str) -> Result<Client> {
        Ok(Client { url: url.trim_end_matches('/').to_string(), token: String::new(), http: http_client()? })
    }

    /// The server's URL as configured, even without a credential.
    pub fn configured_url() -> Option<String> {
        let file = home::home().ok().and_then(|h| home::read_json::<ClientConfig>(&h.join("client.json")));
        std::env::var("DROVER_URL").ok().filter(|s| !s.is_empty()).or_else(|| file.map(|f| f.url))
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{}", self.url, path));
        if self.token.is_empty() {
            req
        } else {
            req.bearer_auth(&self.token)
        }
    }

    /// Sends a request and returns the raw response, turning failures into messages.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let resp = req.send().await.map_err(|e| {
            if e.is_connect() {
                unreachable(&self.url, &e)
            } else if e.is_timeout() {
                anyhow!("the Drover server at {} did not answer in time", self.url)
            } else {
                anyhow!("request to {} failed: {e}", self.url)
            }
        })?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        let msg = serde_json::from_str::<ErrorBody>(&text).map(|b| b.error).unwrap_or_else(|_| match status {
            StatusCode::PAYLOAD_TOO_LARGE => "the request is too large".to_string(),
            _ => format!("the server answered {status}: {}", text.trim()),
        });
        bail!(msg)
    }

    /// POST JSON, decoding JSON; with the fingerprint of the certificate the server
    /// presented (None over plain HTTP).
    pub async fn post_noting_certificate<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<(T, Option<String>)> {
        let resp = self.send(self.request(Method::POST, path).json(body)).await?;
        let seen = resp.extensions().get::<reqwest::tls::TlsInfo>().and_then(|i| i.peer_certificate()).map(drover_tls::fingerprint);
        Ok((resp.json().await.context("decoding the server's answer")?, seen))
    }

    /// GET, decoding JSON.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let resp = self.send(self.request(Method::GET, path)).await?;
        resp.json().await.context("decoding the server's answer")
    }

    /// GET, raw.
    pub async fn get_raw(&self, path: &str) -> Result<reqwest::Response> {
        self.send(self.request(Method::GET, path)).await
    }

    /// GET, raw, telling a failure worth retrying (no connection, a dropped one, a
    /// server restarting or overloaded) from an answer that will not change.
    pub async fn get_retryable(&self, path: &str) -> std::result::Result<reqwest::Response, Attempt> {
        let resp = match self.request(Method::GET, path).send().await {
            Ok(resp) => resp,
            Err(e) if e.is_builder() => return Err(Attempt::Fail(anyhow!("request to {} failed: {e}", self.url))),
            Err(e) => return Err(Attempt::Retry(connection_trouble(&e))),
        };
        let status = resp.status();
        if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            return Err(Attempt::Retry(format!("the server answered {status}")));
        }
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let msg = serde_json::from_str::<ErrorBody>(&text).map(|b| b.error).unwrap_or_else(|_| format!("the server answered {status}"));
            return Err(Attempt::Fail(anyhow!(msg)));
        }
        Ok(resp)
    }

    /// POST JSON, decoding JSON.
    pub async fn post<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T> {
        let resp = self.send(self.request(Method::POST, path).json(body)).await?;
        resp.json().await.context("decoding the server's answer")
    }

    /// PUT JSON, decoding JSON.
    pub async fn put<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T> {
        let resp = self.send(self.request(Method::PUT, path).json(body)).await?;
        resp.json().await.context("decoding the server's answer")
    }

    /// PATCH JSON, decoding JSON.
    pub async fn patch<B: Serialize, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T> {
        let resp = self.send(self.request(Method::PATCH, path).json(body)).await?;
        resp.json().await.context("decoding the server's answer")
    }

    /// DELETE, decoding JSON.
    pub async fn delete_json<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let resp = self.send(self.request(Method::DELETE, path)).await?;
        resp.json().await.context("decoding the server's answer")
    }

    /// DELETE, expecting no body back.
    pub async fn delete(&self, path: &str) -> Result<()> {
        self.send(self.request(Method::DELETE, path)).await?;
        Ok(())
    }

    /// PUT JSON, expecting no body back.
    pub async fn put_ok<B: Serialize>(&self, path: &str, body: &B) -> Result<()> {
        self.send(self.request(Method::PUT, path).json(body)).await?;
        Ok(())
    }

    /// POST JSON, expecting no body back.
    pub async fn post_ok<B: Serialize>(&self, path: &str, body: &B) -> Result<()> {
        self.send(self.request(Method::POST, path).json(body)).await?;
        Ok(())
    }

    /// The WebSocket URL for `path`.
    pub fn ws_url(&self, path: &str) -> String {
        let base = if let Some(rest) = self.url.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = self.url.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            self.url.clone()
        };
        format!("{base}{path}")
    }
}

/// Percent-encodes a path segment (ids are plain, but input is untrusted).
pub fn seg(s: &str) -> String {
    s.bytes()
        .map(
            |b| {
                if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.' {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            },
        )
        .collect()
}
