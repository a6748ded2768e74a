//! TLS at Drover's edges, with rustls (no OpenSSL): what a client trusts ([`trust`]), the
//! server's certificate, reloaded when its files change ([`server`]), and certificate
//! errors said so people can act on them ([`explain`]).

pub mod explain;
pub mod server;
pub mod trust;

use std::sync::Arc;

use sha2::{Digest, Sha256};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read or holds nothing usable.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the configuration (a key that does not match its certificate, say).
    #[error("{0}")]
    Config(String),
}

/// The cryptography every Drover TLS configuration uses (ring).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate's SHA-256 fingerprint, as `AB:CD:…` (what browsers and `openssl x509
/// -fingerprint -sha256` show).
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}
