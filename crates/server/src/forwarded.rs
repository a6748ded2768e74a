//! Who a request comes from, and over what, when reverse proxies may stand in front:
//! `X-Forwarded-For`, `Forwarded` and `X-Forwarded-Proto` are believed only from the
//! proxies the server was told to trust (`--trusted-proxy`). The client is the rightmost
//! address in the chain that is not a trusted proxy (anything left of it could have
//! been written by the client itself).

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use ipnet::IpNet;

use crate::AppState;

/// The client's address, through trusted proxies.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(&canonical(*ip)));
    if !is_trusted(&peer) {
        return peer;
    }
    // The hops the proxies recorded, nearest last.
    let mut hops: Vec<IpAddr> = Vec::new();
    for value in headers.get_all("forwarded").iter().filter_map(|v| v.to_str().ok()) {
        hops.extend(value.split(',').filter_map(forwarded_for));
    }
    if hops.is_empty() {
        for value in headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok()) {
            hops.extend(value.split(',').filter_map(|h| parse_ip(h.trim())));
        }
    }
    hops.into_iter().rev().find(|ip| !is_trusted(ip)).unwrap_or(peer)
}

/// Whether the request reached the server over TLS: directly, or, through a trusted
/// proxy, as it says (`X-Forwarded-Proto: https` or `Forwarded: proto=https`).
pub fn is_https(direct_tls: bool, peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> bool {
    if direct_tls {
        return true;
    }
    if !trusted.iter().any(|n| n.contains(&canonical(peer))) {
        return false;
    }
    let said = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_ascii_lowercase);
    if let Some(f) = said("forwarded") {
        // The nearest proxy's element is the last.
        if let Some(proto) = f.rsplit(',').next().and_then(|el| el.split(';').find_map(|p| p.trim().strip_prefix("proto="))) {
            return proto.trim_matches('"') == "https";
        }
    }
    said("x-forwarded-proto").is_some_and(|p| p.rsplit(',').next().is_some_and(|p| p.trim() == "https"))
}

/// The `for=` of one `Forwarded` element (`for=192.0.2.60`, `for="[2001:db8::1]:4711"`).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let value = element.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.eq_ignore_ascii_case("for").then_some(v.trim().trim_matches('"'))
    })?;
    parse_ip(value)
}

/// An address as proxies write it: bare, `[v6]`, `[v6]:port` or `v4:port`.
fn parse_ip(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Some(canonical(sa.ip()));
    }
    s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).and_then(|r| r.parse().ok()).map(canonical)
}

/// An IPv4 address mapped into IPv6 (`::ffff:192.0.2.1`) is that IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// The address of the peer that sent a request (a proxy, when one is in front).
fn peer(parts: &Parts) -> IpAddr {
    parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| canonical(c.0.ip())).unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

/// The client's address of a request (through trusted proxies), for rate limits and the
/// audit trail.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub IpAddr);

impl FromRequestParts<AppState> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        Ok(ClientAddr(client_ip(peer(parts), &parts.headers, &state.config.trusted_proxies)))
    }
}

/// Whether a request arrived over TLS (directly, or as a trusted proxy says), for the
/// session cookie's `Secure` flag.
#[derive(Debug, Clone, Copy)]
pub struct Https(pub bool);

impl FromRequestParts<AppState> for Https {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let direct = state.config.public_url.starts_with("https://");
        Ok(Https(is_https(direct, peer(parts), &parts.headers, &state.config.trusted_proxies)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn headers_are_believed_only_from_a_trusted_proxy() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let h = headers(&[("x-forwarded-for", "203.0.113.9")]);
        assert_eq!(client_ip(ip("198.51.100.1"), &h, &trusted), ip("198.51.100.1"), "not a proxy: its header is ignored");
        assert_eq!(client_ip(ip("10.1.2.3"), &h, &trusted), ip("203.0.113.9"));
        assert_eq!(client_ip(ip("10.1.2.3"), &h, &[]), ip("10.1.2.3"), "no proxy trusted at all");
    }

    #[test]
    fn the_client_is_the_rightmost_hop_that_is_not_a_trusted_proxy() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        // The client wrote a fake first hop; the proxies appended the real one and themselves.
        let h = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.9, 10.0.0.2")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &h, &trusted), ip("203.0.113.9"));
        let h = headers(&[("forwarded", "for=1.2.3.4, for=\"[2001:db8::7]:4711\";proto=https")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &h, &trusted), ip("2001:db8::7"));
        // Garbage leaves the proxy as the client (rate-limited as one, never unlimited).
        let h = headers(&[("x-forwarded-for", "not-an-address")]);
        assert_eq!(client_ip(ip("10.0.0.1"), &h, &trusted), ip("10.0.0.1"));
        assert_eq!(client_ip(ip("::ffff:10.0.0.1"), &headers(&[("x-forwarded-for", "203.0.113.5")]), &trusted), ip("203.0.113.5"));
    }

    #[test]
    fn https_is_what_a_trusted_proxy_says_or_direct_tls() {
        let trusted: Vec<IpNet> = vec!["127.0.0.1/32".parse().unwrap()];
        let https = headers(&[("x-forwarded-proto", "https")]);
        assert!(is_https(true, ip("192.0.2.1"), &HeaderMap::new(), &[]));
        assert!(is_https(false, ip("127.0.0.1"), &https, &trusted));
        assert!(!is_https(false, ip("192.0.2.1"), &https, &trusted), "an untrusted peer's word counts for nothing");
        assert!(is_https(false, ip("127.0.0.1"), &headers(&[("forwarded", "for=1.2.3.4;proto=https")]), &trusted));
        assert!(!is_https(false, ip("127.0.0.1"), &headers(&[("x-forwarded-proto", "http")]), &trusted));
    }
}
