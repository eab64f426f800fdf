//! Outbound grants: the only places a plugin may send a request, produce a Kafka record or
//! append to a Redis Stream.
//!
//! A grant is `scheme://host[:port]` with `*` allowed for any part (`https://*.example.com`,
//! `http://127.0.0.1:*`, `*://hooks.example.com:8443`, `kafka://broker.example:9092`,
//! `redis://127.0.0.1:6379`); an omitted port is the scheme's default (80, 443, Kafka's 9092,
//! Redis's 6379). The schemes are [`SCHEMES`]: HTTP through wasi:http, the others through the
//! host's own Kafka and Redis clients. A request must match a grant by scheme, host and port, and then every address its
//! host resolves to is checked again: loopback, link-local (cloud metadata lives there),
//! unspecified and other internal-only addresses are refused unless the grant names such an
//! address literally, so a granted name cannot be pointed at the host's own services.

use std::net::IpAddr;

use super::error::PluginError;
use serde::{Deserialize, Serialize};

/// The schemes a grant may name, each with its default port; `*` stands for any of them.
pub const SCHEMES: [(&str, u16); 5] =
    [("http", 80), ("https", 443), ("kafka", 9092), ("redis", 6379), ("rediss", 6379)];

/// The default port of one of [`SCHEMES`].
pub fn default_port(scheme: &str) -> Option<u16> {
    SCHEMES.iter().find(|(s, _)| *s == scheme).map(|(_, port)| *port)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub scheme: String,
    pub host: String,
    /// None: any port.
    pub port: Option<u16>,
}

impl Grant {
    pub fn parse(text: &str) -> Result<Self, PluginError> {
        let bad = |why: &str| {
            PluginError::Invalid(format!("grant `{text}` {why}: expected scheme://host[:port], `*` allowed per part"))
        };
        let (scheme, rest) = text.trim().split_once("://").ok_or_else(|| bad("has no scheme"))?;
        if scheme != "*" && default_port(scheme).is_none() {
            return Err(bad("has a scheme other than http, https, kafka, redis, rediss or *"));
        }
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') || rest.contains('?') || rest.contains('@') {
            return Err(bad("has a path, query or credentials"));
        }
        let (host, port) = match rest.rsplit_once(':') {
            // An IPv6 literal keeps its colons inside brackets.
            Some((h, p)) if !p.contains(']') => (h, Some(p)),
            _ => (rest, None),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        if host.is_empty() {
            return Err(bad("has no host"));
        }
        let wildcard_ok = host == "*" || host.strip_prefix("*.").is_some_and(|rest| !rest.contains('*'));
        if host.contains('*') && !wildcard_ok {
            return Err(bad("uses `*` other than as the whole host or a leading `*.`"));
        }
        let port = match port {
            None => default_port(scheme),
            Some("*") => None,
            Some(p) => Some(p.parse().map_err(|_| bad("has a port that is not a number or *"))?),
        };
        Ok(Self { scheme: scheme.to_owned(), host, port })
    }

    pub fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let host_ok = match self.host.strip_prefix("*.") {
            _ if self.host == "*" => true,
            Some(suffix) => host.ends_with(&format!(".{suffix}")),
            None => self.host == host,
        };
        (self.scheme == "*" || self.scheme == scheme) && host_ok && self.port.is_none_or(|p| p == port)
    }

    /// The address this grant names literally, if its host is an IP address.
    fn literal_ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

/// Addresses only reachable from inside the host or its network: refused unless granted by
/// address. Link-local includes 169.254.169.254, the cloud metadata service. Private ranges
/// (RFC 1918, CGNAT 100.64.0.0/10, ULA fc00::/7) are internal too: a plugin granted
/// `https://*.example.com` cannot be pointed at a neighbour by a name that resolves there,
/// though the service's own deliveries may reach them (`egress`). An IPv6 address carrying
/// an IPv4 one is judged as that IPv4 address.
pub fn is_internal(ip: IpAddr) -> bool {
    match crate::egress::canonical_ip(ip) {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_link_local()
                || v4.is_private()
                || v4.octets()[0] == 0
                || v4.is_broadcast()
                // 100.100.100.200 is Alibaba Cloud's metadata service (in 100.64.0.0/10).
                || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64)
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                // Unique local addresses, AWS's IPv6 metadata address fd00:ec2::254 among them.
                || (v6.segments()[0] & 0xfe00) == 0xfc00
        }
    }
}

/// A plugin's grants, as checked for each request it sends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grants(pub Vec<Grant>);

impl Grants {
    pub fn parse(texts: &[String]) -> Result<Self, PluginError> {
        texts.iter().map(|t| Grant::parse(t)).collect::<Result<_, _>>().map(Self)
    }

    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.0.iter().any(|g| g.matches(scheme, host, port))
    }

    /// Whether a resolved address may be contacted for this scheme and port.
    pub fn allows_address(&self, ip: IpAddr, scheme: &str, port: u16) -> bool {
        !is_internal(ip)
            || self.0.iter().any(|g| g.literal_ip() == Some(ip) && g.matches(scheme, &ip.to_string(), port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(texts: &[&str]) -> Grants {
        Grants::parse(&texts.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn matching_by_scheme_host_and_port() {
        let g = grants(&["https://hooks.example.com", "http://*.internal.example:8080", "*://any-scheme.example:*"]);
        assert!(g.allows("https", "hooks.example.com", 443));
        assert!(g.allows("https", "HOOKS.example.com", 443));
        assert!(!g.allows("http", "hooks.example.com", 80), "scheme differs");
        assert!(!g.allows("https", "hooks.example.com", 8443), "default port only");
        assert!(!g.allows("https", "evil-hooks.example.com", 443));
        assert!(g.allows("http", "a.internal.example", 8080));
        assert!(!g.allows("http", "internal.example", 8080), "*. needs a subdomain");
        assert!(g.allows("http", "any-scheme.example", 1234));
        assert!(!grants(&[]).allows("https", "example.com", 443));
        let brokers = grants(&["kafka://broker.example", "redis://127.0.0.1", "rediss://cache.example:7000"]);
        assert!(brokers.allows("kafka", "broker.example", 9092), "Kafka's default port");
        assert!(!brokers.allows("kafka", "broker.example", 9093));
        assert!(!brokers.allows("http", "broker.example", 9092), "a kafka grant is not an http one");
        assert!(brokers.allows("redis", "127.0.0.1", 6379), "Redis's default port");
        assert!(!brokers.allows("rediss", "127.0.0.1", 6379), "TLS or not is part of the grant");
        assert!(brokers.allows("rediss", "cache.example", 7000));
    }

    #[test]
    fn bad_grants_are_refused_with_the_reason() {
        for bad in [
            "example.com",
            "ftp://x",
            "postgres://x",
            "https://x/path",
            "https://user@x",
            "https://x:port",
            "https://a*b.com",
            "https://",
        ] {
            assert!(Grant::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn internal_addresses_need_a_literal_grant() {
        let by_name = grants(&["http://localhost:*", "https://metadata.example"]);
        assert!(by_name.allows("http", "localhost", 8080));
        assert!(!by_name.allows_address("127.0.0.1".parse().unwrap(), "http", 8080), "a name resolving to loopback");
        assert!(!by_name.allows_address("169.254.169.254".parse().unwrap(), "https", 443), "metadata");
        assert!(!by_name.allows_address("::1".parse().unwrap(), "http", 8080));
        assert!(!by_name.allows_address("::ffff:127.0.0.1".parse().unwrap(), "http", 8080));
        assert!(by_name.allows_address("93.184.216.34".parse().unwrap(), "https", 443), "a public address");
        let literal = grants(&["http://127.0.0.1:*"]);
        assert!(literal.allows_address("127.0.0.1".parse().unwrap(), "http", 9000));
        assert!(!literal.allows_address("127.0.0.2".parse().unwrap(), "http", 9000));
        assert!(!literal.allows_address("127.0.0.1".parse().unwrap(), "https", 9000));
    }

    #[test]
    fn private_ranges_are_internal_to_a_plugin_in_every_spelling() {
        let by_name = grants(&["https://*.example.com"]);
        for internal in [
            "10.1.2.3",
            "172.16.0.9",
            "192.168.1.1",
            "100.64.0.1",
            "0.0.0.1",
            "fd12:3456::1",
            "fc00::1",
            "::ffff:10.0.0.1",
            "64:ff9b::10.0.0.1",
            "2002:c0a8:0101::",
            "::192.168.1.1",
        ] {
            assert!(!by_name.allows_address(internal.parse().unwrap(), "https", 443), "{internal}");
        }
        assert!(by_name.allows_address("172.32.0.1".parse().unwrap(), "https", 443), "just past 172.16/12");
        let literal = grants(&["https://10.1.2.3"]);
        assert!(literal.allows_address("10.1.2.3".parse().unwrap(), "https", 443), "granted by address");
    }
}
