//! The server's certificate: read from PEM files, served to every new connection, and
//! reloaded when the files change or on SIGHUP (short-lived certificates renewed by
//! certbot, Caddy or a private CA's agent are picked up without a restart). A reload that
//! fails keeps the certificate in use and says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;

use crate::TlsError;

/// How often the files are looked at for a change.
const WATCH_EVERY: Duration = Duration::from_secs(2);

/// The server's certificate and key files, and what was last read from them.
#[derive(Debug)]
pub struct ServerCert {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Loaded>,
}

#[derive(Debug, Clone)]
struct Loaded {
    key: Arc<CertifiedKey>,
    stamp: Option<(SystemTime, SystemTime)>,
}

impl ServerCert {
    /// Reads the certificate chain (PEM, leaf first) and its private key (PEM: PKCS#8,
    /// PKCS#1 or SEC1); an error names the file and what is wrong.
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<ServerCert>, TlsError> {
        let loaded = read(cert, key)?;
        Ok(Arc::new(ServerCert { cert: cert.to_path_buf(), key: key.to_path_buf(), current: RwLock::new(loaded) }))
    }

    /// Reads the files again if they changed since the last read (or `force`); returns
    /// whether the certificate in use changed.
    pub fn reload(&self, force: bool) -> Result<bool, TlsError> {
        let stamp = stamp(&self.cert, &self.key);
        if !force && stamp == self.current.read().expect("certificate lock").stamp {
            return Ok(false);
        }
        let loaded = read(&self.cert, &self.key)?;
        let changed = loaded.key.cert != self.current.read().expect("certificate lock").key.cert;
        *self.current.write().expect("certificate lock") = loaded;
        Ok(changed)
    }

    /// The fingerprint of the certificate in use.
    pub fn fingerprint(&self) -> String {
        let key = self.current.read().expect("certificate lock").key.clone();
        key.cert.first().map(|c| crate::fingerprint(c)).unwrap_or_default()
    }

    /// A rustls server configuration serving this certificate (HTTP/1.1).
    pub fn config(self: &Arc<Self>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(crate::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// Reloads on SIGHUP and when the files change, for as long as the process runs.
    pub fn watch(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
            loop {
                let forced = match &mut hup {
                    Some(h) => tokio::select! {
                        _ = h.recv() => true,
                        _ = tokio::time::sleep(WATCH_EVERY) => false,
                    },
                    None => {
                        tokio::time::sleep(WATCH_EVERY).await;
                        false
                    }
                };
                match me.reload(forced) {
                    Ok(true) => tracing::info!(fingerprint = %me.fingerprint(), "TLS certificate reloaded from {}", me.cert.display()),
                    Ok(false) => {}
                    Err(e) => tracing::warn!("TLS certificate not reloaded, the one in use stays: {e}"),
                }
            }
        });
    }
}

/// Trusts exactly the certificate `server` serves at the time of each handshake,
/// whatever its name or issuer: for the device inside `drover up`, which reaches its own
/// server over loopback, where a certificate issued for the server's public name would not
/// match.
#[derive(Debug)]
struct Pinned {
    server: Arc<ServerCert>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _name: &rustls_pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let current = self.server.current.read().expect("certificate lock").key.clone();
        match current.cert.first().is_some_and(|c| c.as_ref() == end_entity.as_ref()) {
            true => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            false => Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure)),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

impl ServerCert {
    /// A client configuration trusting exactly the certificate this server serves, byte
    /// for byte (not whatever a CA vouches for).
    pub fn pinned_client(self: &Arc<Self>) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let provider = crate::provider();
        let verifier = Pinned { server: self.clone(), algorithms: provider.signature_verification_algorithms };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for ServerCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().expect("certificate lock").key.clone())
    }
}

fn stamp(cert: &Path, key: &Path) -> Option<(SystemTime, SystemTime)> {
    let m = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    Some((m(cert)?, m(key)?))
}

fn read(cert: &Path, key: &Path) -> Result<Loaded, TlsError> {
    // Stamped before reading, so a change made during the read is read again next time.
    let stamp = stamp(cert, key);
    let chain = crate::trust::read_certificates(cert)?;
    let file = |reason: String| TlsError::File { path: key.display().to_string(), reason };
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| file(format!("holds no usable private key (PEM): {e}")))?;
    let certified = CertifiedKey::from_der(chain, private, &crate::provider())
        .map_err(|e| TlsError::Config(format!("{} and {} do not go together: {e}", cert.display(), key.display())))?;
    Ok(Loaded { key: Arc::new(certified), stamp })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
        std::fs::write(&cert, c.cert.pem()).unwrap();
        std::fs::write(&key, c.key_pair.serialize_pem()).unwrap();
        (cert, key)
    }

    #[test]
    fn a_changed_certificate_is_reloaded_and_a_broken_one_keeps_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), "a");
        let server = ServerCert::load(&cert, &key).unwrap();
        let first = server.fingerprint();
        assert!(!server.reload(false).unwrap(), "unchanged files are not read again");
        let (cert2, key2) = write_pair(dir.path(), "b");
        std::fs::copy(&cert2, &cert).unwrap();
        std::fs::copy(&key2, &key).unwrap();
        assert!(server.reload(true).unwrap());
        let second = server.fingerprint();
        assert_ne!(first, second);
        std::fs::write(&key, "garbage").unwrap();
        let e = server.reload(true).unwrap_err().to_string();
        assert!(e.contains("private key"), "{e}");
        assert_eq!(server.fingerprint(), second, "the certificate in use stays");
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, _) = write_pair(dir.path(), "a");
        let (_, other_key) = write_pair(dir.path(), "b");
        let e = ServerCert::load(&cert, &other_key).unwrap_err().to_string();
        assert!(e.contains("do not go together"), "{e}");
    }
}
