//! Outbound requests that cannot reach inside: the rules of `drover_core::egress`
//! applied where names are resolved. A webhook URL is checked when it is added, and every
//! delivery connects only to addresses its name resolved to that the rules allow (the
//! client's own resolver filters them), so a name re-pointed inside after it was added
//! (DNS rebinding) gets nothing.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use drover_core::egress::EgressRules;

/// The server's own interface addresses, refused as targets like loopback.
pub fn own_addresses() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else { return Vec::new() };
    addrs
        .filter_map(|a| {
            let sa = a.address?;
            sa.as_sockaddr_in().map(|v4| IpAddr::V4(v4.ip())).or_else(|| sa.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
        })
        .collect()
}

/// The sentence for a refused target, naming the flags that allow it.
pub fn refused(host: &str, ip: IpAddr, why: &str) -> String {
    format!(
        "{host} resolves to {ip} ({why}), which webhooks may not reach: an operator can allow it by starting the server with --allow-webhook-host {host} (or --allow-local-webhooks)"
    )
}

/// Checks a webhook URL's target now: a literal address, or every address its name
/// resolves to. A name that does not resolve yet passes (each delivery checks again).
pub async fn check_url(rules: &EgressRules, url: &reqwest::Url) -> Result<(), String> {
    let Some(host) = url.host_str() else { return Err("a webhook URL needs a host".into()) };
    if rules.host_allowed(host) {
        return Ok(());
    }
    let port = url.port_or_known_default().unwrap_or(443);
    let bare = drover_core::egress::bare_host(host);
    let addrs: Vec<IpAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => match tokio::net::lookup_host((bare, port)).await {
            Ok(found) => found.map(|sa| sa.ip()).collect(),
            Err(_) => return Ok(()),
        },
    };
    for ip in addrs {
        if let Some(why) = rules.refusal(host, ip) {
            return Err(refused(host, ip, why));
        }
    }
    Ok(())
}

/// The webhook client's resolver: a name's addresses, less those the rules refuse (and an
/// error saying why if none are left).
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    rules: Arc<EgressRules>,
}

impl GuardedResolver {
    /// A resolver enforcing `rules`.
    pub fn new(rules: Arc<EgressRules>) -> Self {
        GuardedResolver { rules }
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let rules = self.rules.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut why = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|sa| match rules.refusal(&host, sa.ip()) {
                    None => true,
                    Some(w) => {
                        why.get_or_insert((sa.ip(), w));
                        false
                    }
                })
                .collect();
            match (allowed.is_empty(), why) {
                (true, Some((ip, w))) => Err(refused(&host, ip, w).into()),
                _ => Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

/// Why a delivery to `url` may not go out, when its host is a literal address (names go
/// through [`GuardedResolver`]).
pub fn literal_refusal(rules: &EgressRules, url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let ip: IpAddr = drover_core::egress::bare_host(host).parse().ok()?;
    rules.refusal(host, ip).map(|why| refused(host, ip, why))
}

/// How long one outbound attempt may take in all, and to connect.
const ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The HTTP client of every delivery the server makes (webhooks, Web Push): only to
/// addresses `rules` allow, straight there (a proxy from the environment would resolve
/// the name itself, past the check), and a redirect is a failure (following it would
/// turn the POST into a GET somewhere else and call that delivered).
pub(crate) fn outbound_client(rules: Arc<EgressRules>) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(GuardedResolver::new(rules)))
        .no_proxy()
        .build()
        .expect("an HTTP client")
}
