//! What TLS costs: output throughput to a viewer (`drover session attach`, a pipe) and
//! keystroke echo latency, on a `drover up` serving HTTPS/WSS (`--tls-cert`, a CA made
//! here) against one serving plain HTTP, in the same run, interleaved.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::drover::Up;
use crate::latency::Percentiles;
use crate::median;
use crate::throughput::Sink;

/// TLS figures (medians).
#[derive(Debug, Serialize)]
pub struct Tls {
    /// MB streamed per throughput run.
    pub mb: usize,
    /// Plain HTTP, MB/s.
    pub throughput_plain: f64,
    /// TLS, MB/s.
    pub throughput_tls: f64,
    /// TLS ÷ plain throughput (goal ≥ 0.9).
    pub throughput_ratio: f64,
    /// Bytes the viewers received ÷ bytes printed, lowest of all runs (1.0: nothing
    /// skipped).
    pub viewer_received: f64,
    /// Echo latency over plain HTTP.
    pub echo_plain: Percentiles,
    /// Echo latency over TLS.
    pub echo_tls: Percentiles,
}

/// A CA and a certificate it issued for 127.0.0.1, written into `dir`: (ca, cert, key).
fn pki(dir: &Path) -> Result<(String, String, String)> {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])?.signed_by(&key, &ca, &ca_key)?;
    let path = |name: &str| dir.join(name).display().to_string();
    std::fs::write(path("ca.pem"), ca.pem())?;
    std::fs::write(path("server.pem"), cert.pem())?;
    std::fs::write(path("server.key"), key.serialize_pem())?;
    Ok((path("ca.pem"), path("server.pem"), path("server.key")))
}

/// Runs the comparison `runs` times.
pub fn run(exe: &Path, mb: usize, runs: usize, keys: usize) -> Result<Tls> {
    let dir = tempfile::tempdir()?;
    let (ca, cert, key) = pki(dir.path())?;
    // Every drover this process starts (the CLI, attach) trusts the bench's CA.
    std::env::set_var("DROVER_CA_CERT", &ca);
    let file = dir.path().join("stream.txt");
    let bytes = crate::throughput::make_file(&file, mb)?;
    let plain = Up::start(exe)?;
    let tls = Up::start_with(exe, &["--tls-cert", &cert, "--tls-key", &key])?;
    let (mut p, mut t, mut got) = (Vec::new(), Vec::new(), Vec::<f64>::new());
    let lines = bytes / 86;
    for i in 0..runs {
        // Alternate which side goes first, so neither always runs on a warmer machine.
        let order: [(&Up, &mut Vec<f64>); 2] =
            if i % 2 == 0 { [(&plain, &mut p), (&tls, &mut t)] } else { [(&tls, &mut t), (&plain, &mut p)] };
        for (up, out) in order {
            let (secs, received) = crate::throughput::drover(up, &file, Sink::Pipe)?;
            out.push(bytes as f64 / 1048576.0 / secs);
            got.push(received as f64 / (bytes + lines) as f64);
        }
        println!("  tls throughput run {}/{runs}: plain {:.1} MB/s, tls {:.1} MB/s", i + 1, p[i], t[i]);
    }
    let echo_plain = crate::latency::through_drover(&plain, keys, std::time::Duration::ZERO, crate::latency::Route::Server)?;
    let echo_tls = crate::latency::through_drover(&tls, keys, std::time::Duration::ZERO, crate::latency::Route::Server)?;
    let (throughput_plain, throughput_tls) = (median(&mut p), median(&mut t));
    let viewer_received = got.iter().copied().fold(f64::INFINITY, f64::min);
    anyhow::ensure!(viewer_received > 0.99, "the viewers missed output ({viewer_received:.3} of it): the figures would mean nothing");
    let r = Tls {
        mb,
        throughput_plain,
        throughput_tls,
        throughput_ratio: throughput_tls / throughput_plain,
        viewer_received,
        echo_plain,
        echo_tls,
    };
    println!(
        "tls ({mb} MB × {runs}, {keys} keys, medians): throughput {:.1} MB/s over TLS vs {:.1} plain → {:.2}× (goal ≥ 0.90); echo p50 {:.2} ms TLS vs {:.2} plain, p99 {:.2} vs {:.2}",
        r.throughput_tls, r.throughput_plain, r.throughput_ratio, r.echo_tls.p50_ms, r.echo_plain.p50_ms, r.echo_tls.p99_ms, r.echo_plain.p99_ms
    );
    Ok(r)
}
