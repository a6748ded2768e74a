//! Certificate errors, found wherever they sit in an error's chain (reqwest, tungstenite
//! and tokio-rustls each wrap them differently) and said so people can act on them.

use std::error::Error;

use rustls::CertificateError;

/// What went wrong with TLS, if anything in `err`'s chain is a TLS error.
pub fn tls_problem(err: &(dyn Error + 'static)) -> Option<String> {
    find(err).map(describe)
}

/// The TLS error in `err`'s chain, if there is one.
pub fn find<'a>(err: &'a (dyn Error + 'static)) -> Option<&'a rustls::Error> {
    let mut at: Option<&(dyn Error + 'static)> = Some(err);
    while let Some(e) = at {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        // An io::Error's source skips the error it wraps: look inside it instead.
        if let Some(inner) = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            at = Some(inner);
            continue;
        }
        at = e.source();
    }
    None
}

/// One TLS error, as a sentence with what to do.
pub fn describe(e: &rustls::Error) -> String {
    let rustls::Error::InvalidCertificate(c) = e else {
        return match e {
            rustls::Error::InvalidMessage(_) => {
                format!("the server did not answer in TLS ({e}): does it serve plain http:// on that port?")
            }
            _ => format!("TLS failed: {e}"),
        };
    };
    match c {
        CertificateError::UnknownIssuer => format!(
            "the server's TLS certificate is signed by an authority this machine does not trust ({e}): for a private CA, pass its certificate with --ca-cert FILE or set {}",
            crate::trust::CA_CERT_VARIABLE
        ),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!("the server's TLS certificate is not for the host name in the URL ({e}): use the name the certificate was issued for")
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => format!("the server's TLS certificate has expired ({e})"),
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            format!("the server's TLS certificate is not valid yet ({e}): check this machine's clock")
        }
        _ => format!("the server's TLS certificate was refused ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_error_is_found_inside_an_io_error_and_says_what_to_do() {
        let inner = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        // As hyper-rustls wraps it: an io::Error in an io::Error.
        let io = std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, inner));
        let text = tls_problem(&io).unwrap();
        assert!(text.contains("--ca-cert") && text.contains("DROVER_CA_CERT"), "{text}");
        assert!(tls_problem(&std::io::Error::other("plain")).is_none());
        let expired = describe(&rustls::Error::InvalidCertificate(CertificateError::Expired));
        assert!(expired.contains("expired"), "{expired}");
    }
}
