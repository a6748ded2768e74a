//! What a Drover client trusts: the platform's roots (which honour `SSL_CERT_FILE` and
//! `SSL_CERT_DIR`) plus a private CA given with `--ca-cert FILE` or `DROVER_CA_CERT`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use crate::TlsError;

/// The variable naming a private CA's certificate file (PEM), like `--ca-cert`.
pub const CA_CERT_VARIABLE: &str = "DROVER_CA_CERT";

/// Where a client's trust comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trust {
    /// A private CA's certificates (PEM), trusted besides the platform's roots.
    pub ca_cert: Option<PathBuf>,
}

impl Trust {
    /// `--ca-cert` if given, else `DROVER_CA_CERT`.
    pub fn new(flag: Option<&Path>) -> Trust {
        let env = std::env::var_os(CA_CERT_VARIABLE).filter(|v| !v.is_empty()).map(PathBuf::from);
        Trust { ca_cert: flag.map(Path::to_path_buf).or(env) }
    }

    /// Whether a private CA is trusted (a changed server certificate is then worth a
    /// loud warning: nobody else vouches for it).
    pub fn is_private(&self) -> bool {
        self.ca_cert.is_some()
    }

    /// The roots: the private CA's certificates and the platform's.
    pub fn roots(&self) -> Result<RootCertStore, TlsError> {
        let mut roots = RootCertStore::empty();
        if let Some(path) = &self.ca_cert {
            for cert in read_certificates(path)? {
                roots
                    .add(cert)
                    .map_err(|e| TlsError::File { path: path.display().to_string(), reason: format!("not a CA certificate: {e}") })?;
            }
        }
        let native = rustls_native_certs::load_native_certs();
        for e in &native.errors {
            tracing::debug!("a platform certificate could not be read: {e}");
        }
        let (added, ignored) = roots.add_parsable_certificates(native.certs);
        if ignored > 0 {
            tracing::debug!("{ignored} platform certificates were not usable ({added} were)");
        }
        Ok(roots)
    }

    /// A rustls client configuration trusting these roots.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let config = rustls::ClientConfig::builder_with_provider(crate::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(self.roots()?)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

/// Every certificate in a PEM file; an error if there is none.
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let file = |reason: String| TlsError::File { path: path.display().to_string(), reason };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| file(format!("cannot be read: {e}")))?
        .collect::<Result<_, _>>()
        .map_err(|e| file(format!("is not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(file("holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)".into()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_ca_is_added_to_the_roots_and_a_bad_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["Drover test CA".into()]).unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, ca.cert.pem()).unwrap();
        let platform = Trust { ca_cert: None }.roots().unwrap().len();
        let with = Trust { ca_cert: Some(path) }.roots().unwrap().len();
        assert_eq!(with, platform + 1);
        let bad = dir.path().join("bad.pem");
        std::fs::write(&bad, "not a certificate").unwrap();
        let e = Trust { ca_cert: Some(bad.clone()) }.roots().unwrap_err().to_string();
        assert!(e.contains(&bad.display().to_string()) && e.contains("no certificate"), "{e}");
        let missing = Trust { ca_cert: Some(dir.path().join("missing.pem")) }.roots().unwrap_err().to_string();
        assert!(missing.contains("cannot be read"), "{missing}");
    }
}
