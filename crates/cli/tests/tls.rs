//! TLS end to end: a test CA made here, `drover server --tls-cert`, and the CLI, `attach`,
//! `tail --follow`, device enrollment and the device link over `https`/`wss`; a CA the
//! client does not trust refused with a clear message; a certificate rotated under the
//! running server picked up; plain HTTP refused on a non-loopback address.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use support::*;

/// A certificate authority made for one test.
struct Ca {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// Writes the CA's certificate to `dir/name.pem`.
    fn write(&self, dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(format!("{name}.pem"));
        std::fs::write(&path, self.cert.pem()).unwrap();
        path
    }

    /// Issues a server certificate for 127.0.0.1 and localhost into `cert` and `key`.
    fn issue(&self, cert: &Path, key: &Path) {
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        let server_key = rcgen::KeyPair::generate().unwrap();
        let issued = params.signed_by(&server_key, &self.cert, &self.key).unwrap();
        // Key first, then certificate: a reload in between sees a mismatch and keeps the
        // old pair, and the next look takes the new one.
        std::fs::write(key, server_key.serialize_pem()).unwrap();
        std::fs::write(cert, issued.pem()).unwrap();
    }
}

/// A test CA, its certificate's file, and a server certificate and key it issued, in `dir`.
struct Pki {
    dir: tempfile::TempDir,
    ca: Ca,
    ca_path: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Pki {
    /// Makes them; every drover the test starts from now on (server, device, CLI) trusts
    /// the CA (`DROVER_CA_CERT`).
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new("Drover test CA");
        let ca_path = ca.write(dir.path(), "ca");
        let (cert, key) = (dir.path().join("server.pem"), dir.path().join("server.key"));
        ca.issue(&cert, &key);
        std::env::set_var("DROVER_CA_CERT", &ca_path);
        Pki { dir, ca, ca_path, cert, key }
    }
}

/// The fingerprint of the certificate the server at `url` presents now.
fn presented(url: &str, ca: &Path) -> String {
    let addr = url.trim_start_matches("https://");
    let trust = drover_tls::trust::Trust { ca_cert: Some(ca.to_path_buf()) };
    let config = trust.client_config().unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::clone(&config), name).unwrap();
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    conn.complete_io(&mut sock).unwrap();
    drover_tls::fingerprint(&conn.peer_certificates().unwrap()[0])
}

/// Reads `child`'s stdout until a line holds `needle`.
fn read_until(child: &mut std::process::Child, needle: &str) {
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).split(b'\n');
    let found = std::thread::spawn({
        let needle = needle.to_string();
        move || lines.any(|l| l.is_ok_and(|l| String::from_utf8_lossy(&l).contains(&needle)))
    });
    let deadline = std::time::Instant::now() + secs(20);
    while !found.is_finished() {
        assert!(std::time::Instant::now() < deadline, "`{needle}` never came");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(found.join().unwrap(), "`{needle}` never came");
}

#[test]
fn the_cli_attach_tail_and_the_device_link_all_speak_tls() {
    let Pki { dir, ca, ca_path, cert, key } = Pki::new();
    let split = Split::start_with("tlsdev", &["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], &[]);
    assert!(split.url.starts_with("https://127.0.0.1:"), "{}", split.url);

    // The device enrolled and its link is up over wss (start_with waited for it); it kept
    // the certificate it enrolled against.
    let kept = std::fs::read_to_string(split.device_home.path().join("device-daemon/server-certificate")).unwrap();
    assert_eq!(kept.trim(), presented(&split.url, &ca_path));

    let id = split.cli.start(&["sh", "-c", "echo over-tls; sleep 60"]);
    split.cli.wait_text(&id, "over-tls", secs(20));
    let mut tail = split.cli.cmd().args(["session", "tail", &id, "--follow"]).stdout(Stdio::piped()).spawn().unwrap();
    read_until(&mut tail, "over-tls");
    let _ = tail.kill();
    let mut attach =
        split.cli.cmd().args(["session", "attach", &id, "--read-only"]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    read_until(&mut attach, "over-tls");
    let _ = attach.kill();

    // A client that does not trust the CA is told what is wrong and what to do.
    let other = Ca::new("Someone else").write(dir.path(), "other");
    let out = split.cli.cmd().env("DROVER_CA_CERT", &other).args(["session", "list"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("securely") && err.contains("--ca-cert"), "{err}");
    let out = split.cli.cmd().env("DROVER_CA_CERT", &other).args(["session", "attach", &id, "--read-only"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--ca-cert"), "{err}");

    // A renewed certificate is served to new connections without a restart.
    let before = presented(&split.url, &ca_path);
    ca.issue(&cert, &key);
    wait_until("the renewed certificate served", secs(15), || (presented(&split.url, &ca_path) != before).then_some(()));
    split.cli.ok(&["session", "list"]);
}

#[test]
fn plain_http_is_refused_on_an_address_others_can_reach() {
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin())
        .args(["server", "--listen", "0.0.0.0:0"])
        .env("DROVER_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("--tls-cert") && err.contains("--trusted-proxy") && err.contains("--insecure-http"), "{err}");
    // Told to, it serves.
    let mut child = spawn_drover_on(home.path(), None, &["server", "--listen", "0.0.0.0:0", "--insecure-http"]);
    let url = read_url(&mut child, "Drover server is running at ");
    assert!(url.starts_with("http://"), "{url}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn drover_up_serves_tls_and_its_own_device_trusts_exactly_its_certificate() {
    let Pki { dir, cert, key, .. } = Pki::new();
    // `up` is given another CA, which would refuse its server's certificate: its device
    // trusts the certificate its server serves, not what it is told to trust.
    let other = Ca::new("Someone else").write(dir.path(), "other");
    let up_args =
        [test_sandbox_args(), vec!["--tls-cert".into(), cert.display().to_string(), "--tls-key".into(), key.display().to_string()]]
            .concat();
    let d = Drover::up_env(tempfile::tempdir().unwrap(), 4, up_args, vec![("DROVER_CA_CERT".into(), other.display().to_string())]);
    assert!(d.url.starts_with("https://"), "{}", d.url);
    let id = d.start(&["sh", "-c", "echo from-the-local-device"]);
    d.wait_text(&id, "from-the-local-device", secs(20));
}
