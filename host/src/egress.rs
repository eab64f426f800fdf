//! The egress policy: which addresses a delivery may connect to, for the native transports and
//! for plugins alike.
//!
//! The policy is checked on the address a connection is actually made to, never on URL text:
//! names are resolved by our own resolver ([`PolicyResolver`]), which drops every address the
//! policy refuses, and a URL whose host is an address is first put in the form a connector
//! reads it in ([`host_address`]: `127.1`, `2130706433`, `0x7f000001` and `127.0.0.1.` are
//! all 127.0.0.1, `0` is 0.0.0.0), then checked. An IPv4 address carried in an IPv6 one is
//! checked as that IPv4 address: IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`,
//! NAT64 `64:ff9b::a.b.c.d` and 6to4 `2002:AABB:CCDD::` (a gateway may turn each into a
//! connection to the IPv4 address). The rules, first match wins:
//!
//! 1. an address in `TE_EGRESS_ALLOW` (CIDR list) is allowed;
//! 2. an address in `TE_EGRESS_DENY` (CIDR list) is refused;
//! 3. addresses that are never a delivery target are refused: `0.0.0.0/8` and `::` (which
//!    reach this host), broadcast and multicast, link-local (169.254.0.0/16, fe80::/10, where
//!    cloud metadata services live) and the other cloud metadata addresses (100.100.100.200,
//!    fd00:ec2::254);
//! 4. the service's policy ([`EgressPolicy::parse`]) refuses loopback (127.0.0.0/8, ::1): the
//!    host's own services, the taskexec API among them, are not for key holders to reach;
//! 5. everything else is allowed — private ranges included (RFC 1918, ULA, CGNAT
//!    100.64.0.0/10), so a team's service delivering to its neighbours works out of the box; a
//!    deployment shared by several teams denies them with
//!    `TE_EGRESS_DENY=10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7`.
//!
//! Deliveries also carry a mark ([`DELIVERY_MARK`]) that the API refuses, so no
//! delivery reaches the service's own API by whatever address or proxy. Plugins are also held
//! to their grants (`plugin::grants`), on top of this policy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

use crate::config::ConfigError;
use crate::transport::http::client::{BoxError, Resolve, Resolving};

/// Where deliveries may connect. `Default` refuses only what is never a target (rule 3): for
/// code that runs without the service (a local `taskexec plugin run`, tests); the service's
/// own policy comes from [`EgressPolicy::parse`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    /// Refuse loopback unless allowed (rule 4).
    protect_host: bool,
    /// The value of [`DELIVERY_MARK`] every HTTP request of a delivery carries (the native
    /// transport's and plugins'), and the API refuses.
    mark: Option<String>,
}

/// The header that marks a request as one of this service's deliveries. Its value is derived
/// from the secret encryption key, so each deployment knows its own mark (and a delivery to
/// another deployment's API is not refused); a spec's own header of that name is replaced.
pub const DELIVERY_MARK: &str = "taskexec-delivery";

/// Why an address was refused, for the attempt's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the egress policy refuses {address}: {rule}")]
pub struct EgressDenied {
    pub address: IpAddr,
    pub rule: String,
}

impl EgressPolicy {
    /// The policy from `TE_EGRESS_ALLOW` and `TE_EGRESS_DENY` (comma-separated CIDRs or
    /// addresses); an error names the variable and the entry.
    /// This is the service's policy: loopback is refused unless `TE_EGRESS_ALLOW` names it.
    pub fn parse(allow: Option<&str>, deny: Option<&str>) -> Result<Self, ConfigError> {
        Ok(Self {
            allow: parse_list("TE_EGRESS_ALLOW", allow)?,
            deny: parse_list("TE_EGRESS_DENY", deny)?,
            protect_host: true,
            mark: None,
        })
    }

    /// Mark every request of a delivery with `mark` ([`DELIVERY_MARK`]).
    pub fn with_delivery_mark(mut self, mark: String) -> Self {
        self.mark = Some(mark);
        self
    }

    /// The mark deliveries carry, if one is set.
    pub fn delivery_mark(&self) -> Option<&str> {
        self.mark.as_deref()
    }

    /// Whether a connection to `address` is allowed.
    pub fn check(&self, address: IpAddr) -> Result<(), EgressDenied> {
        let ip = canonical_ip(address);
        let denied = |rule: String| Err(EgressDenied { address: ip, rule });
        if let Some(net) = self.allow.iter().find(|n| n.contains(&ip)) {
            tracing::trace!(%ip, %net, "Allowed by TE_EGRESS_ALLOW.");
            return Ok(());
        }
        if let Some(net) = self.deny.iter().find(|n| n.contains(&ip)) {
            return denied(format!("it is in TE_EGRESS_DENY ({net})"));
        }
        if let Some(why) = never_a_target(ip) {
            return denied(format!("{why} (allow it with TE_EGRESS_ALLOW)"));
        }
        if self.protect_host && ip.is_loopback() {
            return denied("it is loopback: this host's own services (allow it with TE_EGRESS_ALLOW)".to_owned());
        }
        Ok(())
    }
}

fn parse_list(variable: &'static str, text: Option<&str>) -> Result<Vec<IpNet>, ConfigError> {
    text.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<IpNet>().or_else(|_| t.parse::<IpAddr>().map(IpNet::from)).map(|net| net.trunc()).map_err(|_| {
                ConfigError::new(variable, format!("'{t}' is not an address or CIDR range (e.g. 10.0.0.0/8)"))
            })
        })
        .collect()
}

/// An IPv6 address that carries an IPv4 one, as that IPv4 address: IPv4-mapped
/// (`::ffff:0:0/96`), IPv4-compatible (`::/96`, but `::` and `::1`), NAT64 (`64:ff9b::/96`)
/// and 6to4 (`2002::/16`, the IPv4 address in bits 16–47).
pub(crate) fn canonical_ip(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    let low = |a: u16, b: u16| IpAddr::V4(Ipv4Addr::new((a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8));
    if s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1) {
        return low(s[6], s[7]);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return low(s[6], s[7]);
    }
    if s[0] == 0x2002 {
        return low(s[1], s[2]);
    }
    ip
}

/// Why an address is never a delivery target, if it is one of those.
fn never_a_target(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            if v4.octets()[0] == 0 {
                Some("0.0.0.0/8 is not a destination (it reaches this host)")
            } else if v4.is_broadcast() || v4.is_multicast() {
                Some("it is a broadcast or multicast address")
            } else if v4.is_link_local() {
                Some("it is link-local, where cloud metadata services answer")
            } else if v4 == Ipv4Addr::new(100, 100, 100, 200) {
                Some("it is a cloud metadata address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_unspecified() {
                Some(":: is not a destination (it reaches this host)")
            } else if v6.is_multicast() {
                Some("it is a multicast address")
            } else if (v6.segments()[0] & 0xffc0) == 0xfe80 {
                Some("it is link-local")
            } else if v6 == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
                Some("it is a cloud metadata address")
            } else {
                None
            }
        }
    }
}

/// The address a URL's host names literally, in any spelling; None for a name.
pub fn literal_address(url: &str) -> Option<IpAddr> {
    host_address(&url::Url::parse(url).ok()?)
}

/// The address a parsed URL's host names literally: an address in any spelling the WHATWG URL
/// standard accepts is that address, as a connector reads it (`127.1` → 127.0.0.1); None for
/// a name.
pub fn host_address(url: &url::Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    }
}

/// The HTTP transport's resolver: it only ever returns addresses the policy allows, so the
/// check holds for the address connected to (a name cannot change its answer between a check
/// and the connection).
pub struct PolicyResolver {
    pub policy: Arc<EgressPolicy>,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: &str) -> Resolving {
        let (policy, name) = (self.policy.clone(), name.to_owned());
        Box::pin(async move {
            // Port 0: the connector sets the URL's port on every address.
            match resolve_allowed(&policy, &name, 0).await {
                Ok(allowed) => Ok(allowed),
                // The refusal itself, so `denied_in` finds it in the client's chain of causes.
                Err(ResolveError::Denied(denied)) => Err(Box::new(denied) as BoxError),
                Err(ResolveError::Lookup { source, .. }) => Err(Box::new(source) as BoxError),
            }
        })
    }
}

/// Why a host cannot be connected to: it does not resolve, or the policy refuses every
/// address it has.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("cannot resolve {host}: {source}")]
    Lookup {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Denied(#[from] EgressDenied),
}

/// The addresses of `host` (a name, or an address in any spelling) the policy allows, for a
/// client that connects to addresses rather than names: what it connects to is what was
/// checked. An error when none is left.
pub async fn resolve_allowed(policy: &EgressPolicy, host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
    // `[::1]` as a URL writes it, and every spelling a URL parser reads as an address.
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let literal = bare.parse::<IpAddr>().ok().or_else(|| literal_address(&format!("http://{host}/")));
    if let Some(ip) = literal {
        policy.check(ip)?;
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let found: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|source| ResolveError::Lookup { host: bare.to_owned(), source })?
        .collect();
    let mut refused = None;
    let allowed: Vec<SocketAddr> = found
        .into_iter()
        .filter(|addr| match policy.check(addr.ip()) {
            Ok(()) => true,
            Err(denied) => {
                refused.get_or_insert(denied);
                false
            }
        })
        .collect();
    match (allowed.is_empty(), refused) {
        (true, Some(denied)) => Err(denied.into()),
        _ => Ok(allowed),
    }
}

/// Whether a Unix socket may be connected to: it reaches this host, so it is allowed exactly
/// where the policy allows loopback (127.0.0.1).
pub fn check_local_socket(policy: &EgressPolicy) -> Result<(), EgressDenied> {
    policy.check(IpAddr::V4(Ipv4Addr::LOCALHOST)).map_err(|denied| EgressDenied {
        rule: format!("a Unix socket reaches this host, and {}", denied.rule),
        ..denied
    })
}

/// The policy's refusal in an error's chain of causes, if it is there.
pub fn denied_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a EgressDenied> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(denied) = e.downcast_ref::<EgressDenied>() {
            return Some(denied);
        }
        cause = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_default_refuses_metadata_link_local_and_unspecified_and_allows_the_rest() {
        let p = EgressPolicy::default();
        for refused in [
            "169.254.169.254",
            "169.254.1.1",
            "100.100.100.200",
            "0.0.0.0",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "255.255.255.255",
            "224.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            assert!(p.check(ip(refused)).is_err(), "{refused}");
        }
        for allowed in ["127.0.0.1", "::1", "10.1.2.3", "192.168.0.10", "8.8.8.8", "2606:4700::1111"] {
            assert!(p.check(ip(allowed)).is_ok(), "{allowed}");
        }
    }

    #[test]
    fn the_services_policy_refuses_loopback_in_every_form_and_keeps_private_ranges() {
        let p = EgressPolicy::parse(None, None).unwrap();
        for refused in [
            "127.0.0.1",
            "127.255.0.9",
            "::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "0.0.0.1",
            "0.255.255.255",
            "169.254.169.254",
        ] {
            let error = p.check(ip(refused)).expect_err(refused);
            assert!(error.to_string().contains("TE_EGRESS_ALLOW"), "{refused}: {error}");
        }
        for allowed in
            ["10.1.2.3", "172.16.0.1", "192.168.0.10", "100.64.0.1", "fd12::1", "8.8.8.8", "2002:0808:0808::"]
        {
            assert!(p.check(ip(allowed)).is_ok(), "{allowed}");
        }
        let open = EgressPolicy::parse(Some("127.0.0.0/8,::1/128"), None).unwrap();
        assert!(
            open.check(ip("127.0.0.1")).is_ok() && open.check(ip("::1")).is_ok(),
            "loopback, allowed by the operator"
        );
        assert!(open.check(ip("0.0.0.1")).is_err(), "0.0.0.0/8 stays refused");
    }

    #[test]
    fn operators_deny_and_allow_ranges() {
        let p = EgressPolicy::parse(Some("169.254.169.254, 10.1.2.3"), Some("127.0.0.0/8,10.0.0.0/8")).unwrap();
        let err = p.check(ip("127.0.0.2")).unwrap_err();
        assert!(err.to_string().contains("TE_EGRESS_DENY (127.0.0.0/8)"), "{err}");
        assert!(p.check(ip("::ffff:127.0.0.1")).is_err(), "an IPv4-mapped address is the IPv4 one");
        assert!(p.check(ip("10.9.9.9")).is_err());
        assert!(p.check(ip("10.1.2.3")).is_ok(), "an allowed address inside a denied range");
        assert!(p.check(ip("169.254.169.254")).is_ok(), "metadata, allowed by the operator");
        assert!(p.check(ip("169.254.1.1")).is_err());
        let err = EgressPolicy::parse(None, Some("10.0.0.0/8,banana")).unwrap_err();
        assert_eq!(err.variable, "TE_EGRESS_DENY");
        assert!(err.to_string().contains("TE_EGRESS_DENY: 'banana'"), "{err}");
    }

    #[test]
    fn every_spelling_of_an_address_is_read_as_that_address() {
        for url in
            ["http://127.1/", "http://2130706433/", "http://0x7f000001/", "http://127.0.0.1./", "http://0177.0.0.1/"]
        {
            assert_eq!(literal_address(url), Some(ip("127.0.0.1")), "{url}");
        }
        assert_eq!(literal_address("http://0/"), Some(ip("0.0.0.0")));
        assert_eq!(literal_address("http://[::ffff:7f00:1]/"), Some(ip("::ffff:127.0.0.1")));
        assert_eq!(literal_address("http://example.com/"), None);
    }

    #[tokio::test]
    async fn the_resolver_drops_refused_addresses() {
        let deny_loopback = Arc::new(EgressPolicy::parse(None, Some("127.0.0.0/8,::1/128")).unwrap());
        let resolver = PolicyResolver { policy: deny_loopback };
        let error = match resolver.resolve("localhost").await {
            Ok(_) => panic!("localhost resolved past a loopback deny list"),
            Err(e) => e,
        };
        assert!(denied_in(error.as_ref()).is_some(), "{error}");
        let error =
            resolve_allowed(&EgressPolicy::parse(None, Some("127.0.0.0/8")).unwrap(), "127.1", 6379).await.unwrap_err();
        assert!(matches!(error, ResolveError::Denied(_)), "{error}");
        let deny_loopback = EgressPolicy::parse(None, Some("127.0.0.0/8")).unwrap();
        assert!(check_local_socket(&deny_loopback).is_err(), "a Unix socket is loopback");
        assert!(check_local_socket(&EgressPolicy::default()).is_ok());
        let open = PolicyResolver { policy: Arc::default() };
        let addrs: Vec<SocketAddr> = open.resolve("localhost").await.unwrap();
        assert!(!addrs.is_empty());
    }
}
