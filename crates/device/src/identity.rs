//! The server's certificate as this device knows it: the fingerprint seen at enrollment,
//! then at every connection. A change is logged, loudly when only a private CA vouches
//! for the server (a certificate it signed for an impostor would otherwise pass unseen);
//! the new fingerprint is then the one known, so each change is reported once.

use std::path::PathBuf;

use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Where the fingerprint is kept, and whether the trust is a private CA's.
#[derive(Debug, Clone)]
pub struct ServerIdentity {
    /// The file holding the last fingerprint seen.
    pub file: PathBuf,
    /// Whether a private CA (`--ca-cert`) is trusted.
    pub private_ca: bool,
}

impl ServerIdentity {
    /// Compares `seen` with the fingerprint known, says so if it changed, and keeps it.
    pub fn check(&self, seen: &str) {
        let known = std::fs::read_to_string(&self.file).ok().map(|k| k.trim().to_string());
        match known.as_deref() {
            Some(k) if k == seen => return,
            Some(k) if self.private_ca => tracing::error!(
                known = k,
                seen,
                "THE SERVER'S TLS CERTIFICATE CHANGED. Only your private CA vouches for it: if nobody renewed it on purpose, stop this device (its credential and every run's output go to whoever holds that certificate)"
            ),
            Some(k) => tracing::info!(known = k, seen, "the server's TLS certificate changed (renewed)"),
            None => tracing::info!(seen, "the server's TLS certificate noted"),
        }
        if let Err(e) = std::fs::write(&self.file, format!("{seen}\n")) {
            tracing::warn!(file = %self.file.display(), "could not keep the server's certificate fingerprint: {e}");
        }
    }
}

/// The fingerprint of the certificate the server presented on this link (None over plain
/// `ws://`).
pub fn peer_fingerprint<S>(ws: &WebSocketStream<MaybeTlsStream<S>>) -> Option<String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    match ws.get_ref() {
        MaybeTlsStream::Rustls(tls) => tls.get_ref().1.peer_certificates()?.first().map(|c| drover_tls::fingerprint(c)),
        _ => None,
    }
}
