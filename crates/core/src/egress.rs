//! Where the server's outbound requests (webhook deliveries) may go: never to an address
//! inside — loopback, link-local (cloud metadata at 169.254.169.254), private and
//! shared ranges, unique-local IPv6, multicast, the server's own addresses — unless the
//! server's operator allowed that host or local targets by name. Decided on the
//! addresses a name resolves to, so DNS cannot point a public name inside.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What outbound requests may reach, beyond the public internet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressRules {
    /// Hosts (as written in URLs, lower case) that may resolve anywhere
    /// (`--allow-webhook-host`).
    pub allowed_hosts: Vec<String>,
    /// Every target may be inside (`--allow-local-webhooks`).
    pub allow_local: bool,
    /// The server's own addresses (its interfaces), refused like loopback.
    pub own: Vec<IpAddr>,
}

/// A URL's host without the brackets of an IPv6 literal (`[::1]` → `::1`).
pub fn bare_host(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

impl EgressRules {
    /// Whether `host` may resolve to anything.
    pub fn host_allowed(&self, host: &str) -> bool {
        let host = bare_host(host);
        self.allow_local || self.allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Why `host`, resolved to `ip`, may not be reached; None if it may.
    pub fn refusal(&self, host: &str, ip: IpAddr) -> Option<&'static str> {
        if self.host_allowed(host) {
            return None;
        }
        inside(ip).or(self.own.contains(&ip).then_some("this server's own address"))
    }
}

/// Why `ip` is an address inside (not on the public internet), if it is.
pub fn inside(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => inside_v4(v4),
        IpAddr::V6(v6) => inside_v6(v6),
    }
}

fn inside_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, _, _] = ip.octets();
    match () {
        _ if ip.is_loopback() => Some("loopback"),
        _ if ip.is_unspecified() || a == 0 => Some("this host (0.0.0.0/8)"),
        _ if ip.is_link_local() => Some("link-local (cloud metadata lives here)"),
        _ if ip.is_private() => Some("a private network"),
        _ if a == 100 && (64..128).contains(&b) => Some("carrier-grade NAT (100.64.0.0/10)"),
        _ if ip.is_multicast() => Some("multicast"),
        _ if ip.is_broadcast() || a >= 240 => Some("reserved"),
        _ if a == 198 && (b == 18 || b == 19) => Some("a benchmarking network (198.18.0.0/15)"),
        _ if a == 192 && b == 0 && ip.octets()[2] == 0 => Some("IETF protocol assignments (192.0.0.0/24)"),
        _ => None,
    }
}

fn inside_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return inside_v4(v4);
    }
    let seg = ip.segments();
    match () {
        _ if ip.is_loopback() => Some("loopback"),
        _ if ip.is_unspecified() => Some("this host (::)"),
        _ if seg[0] & 0xffc0 == 0xfe80 => Some("link-local"),
        _ if seg[0] & 0xfe00 == 0xfc00 => Some("unique-local (fc00::/7)"),
        _ if seg[0] & 0xffc0 == 0xfec0 => Some("site-local (fec0::/10)"),
        _ if ip.is_multicast() => Some("multicast"),
        // NAT64 and 6to4 carry an IPv4 address that is judged as such.
        _ if seg[0] == 0x64 && seg[1] == 0xff9b => {
            inside_v4(Ipv4Addr::new((seg[6] >> 8) as u8, seg[6] as u8, (seg[7] >> 8) as u8, seg[7] as u8))
        }
        _ if seg[0] == 0x2002 => inside_v4(Ipv4Addr::new((seg[1] >> 8) as u8, seg[1] as u8, (seg[2] >> 8) as u8, seg[2] as u8)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_inside_range_is_refused_and_the_internet_is_not() {
        for inner in [
            "127.0.0.1",
            "127.8.9.1",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "fc00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(inside(ip(inner)).is_some(), "{inner} is inside");
        }
        for outer in ["93.184.216.34", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "64:ff9b::101:101"] {
            assert_eq!(inside(ip(outer)), None, "{outer} is public");
        }
    }

    #[test]
    fn the_operator_allows_hosts_by_name_or_everything_local() {
        let mut rules = EgressRules { own: vec![ip("203.0.113.7")], ..Default::default() };
        assert_eq!(rules.refusal("example.com", ip("203.0.113.7")), Some("this server's own address"));
        assert_eq!(rules.refusal("hooks.internal", ip("10.0.0.5")), Some("a private network"));
        rules.allowed_hosts.push("hooks.internal".into());
        assert_eq!(rules.refusal("HOOKS.internal", ip("10.0.0.5")), None);
        assert_eq!(rules.refusal("other.internal", ip("10.0.0.5")), Some("a private network"));
        rules.allow_local = true;
        assert_eq!(rules.refusal("other.internal", ip("127.0.0.1")), None);
    }
}
