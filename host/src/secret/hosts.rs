//! Where a secret may be sent: `allowed_hosts`, a list of host names (`api.example.com`),
//! wildcards over a domain's subdomains (`*.example.com`) and IP addresses.
//!
//! A key holder can point an endpoint that reads a secret at any receiver, including one that
//! echoes what it gets; redaction hides the echo from the attempt's record, but the receiver has
//! the value. A secret that names its hosts cannot leave for any other: before each delivery the
//! worker compares the hosts the rendered spec reaches ([`Destinations`]) with the list of every
//! secret the spec reads, and a mismatch fails the attempt permanently, before anything is sent.

use std::fmt;

/// At most this many entries: a secret goes to one service, perhaps a few regions of it.
pub const MAX_ALLOWED_HOSTS: usize = 32;
/// A DNS name is at most 253 characters.
const MAX_HOST_LEN: usize = 253;

/// A secret's `allowed_hosts`, checked and lower-cased.
#[derive(Clone, PartialEq, Eq)]
pub struct AllowedHosts(Vec<String>);

impl AllowedHosts {
    /// Parse the list a user gave; the error names the entry (`allowed_hosts[2]: …`).
    pub fn parse(entries: &[String]) -> Result<Self, (String, String)> {
        if entries.is_empty() {
            return Err((
                "allowed_hosts".into(),
                "must name at least one host (leave it out, or null, to allow any host)".into(),
            ));
        }
        if entries.len() > MAX_ALLOWED_HOSTS {
            return Err(("allowed_hosts".into(), format!("must have at most {MAX_ALLOWED_HOSTS} entries")));
        }
        let mut hosts = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let field = format!("allowed_hosts[{i}]");
            let host = normalize(entry);
            if host.is_empty() || host.len() > MAX_HOST_LEN {
                return Err((field, format!("must be a host name of 1 to {MAX_HOST_LEN} characters")));
            }
            let name = host.strip_prefix("*.").unwrap_or(&host);
            let ip = name.parse::<std::net::IpAddr>().is_ok();
            if ip && name.len() != host.len() {
                return Err((field, "a wildcard covers names, not addresses".into()));
            }
            let label_ok = |l: &str| {
                !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            };
            if !ip && !name.split('.').all(label_ok) {
                return Err((
                    field,
                    "must be a host name (letters, digits, '-' and '.'), `*.` and a domain, or an IP address; no scheme, port or path"
                        .into(),
                ));
            }
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
        Ok(Self(hosts))
    }

    /// The stored form: a JSON array.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).expect("strings serialize")
    }

    /// Read the stored form back; `None` for a value this server did not write.
    pub fn from_json(text: &str) -> Option<Self> {
        let entries: Vec<String> = serde_json::from_str(text).ok()?;
        Self::parse(&entries).ok()
    }

    /// The stored form as the worker holds it to: a list it cannot read allows no host (a
    /// damaged row must not turn a restricted secret into one that goes anywhere).
    pub fn from_stored(text: &str) -> Self {
        Self::from_json(text).unwrap_or(Self(Vec::new()))
    }

    pub fn entries(&self) -> &[String] {
        &self.0
    }

    /// Whether a delivery to `host` may carry the secret.
    pub fn allows(&self, host: &str) -> bool {
        let host = normalize(host);
        self.0.iter().any(|entry| match entry.strip_prefix("*.") {
            Some(domain) => host.strip_suffix(domain).is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => *entry == host,
        })
    }

    /// Whether every host a pattern of the same syntax (a plugin grant's host: `name`,
    /// `*.domain` or `*`) can reach is allowed.
    pub fn covers(&self, pattern: &str) -> bool {
        let pattern = normalize(pattern);
        match pattern.strip_prefix("*.") {
            _ if pattern == "*" => false,
            Some(domain) => self.0.iter().any(|entry| {
                entry.strip_prefix("*.").is_some_and(|allowed| {
                    domain == allowed || domain.strip_suffix(allowed).is_some_and(|sub| sub.ends_with('.'))
                })
            }),
            None => self.allows(&pattern),
        }
    }
}

impl fmt::Debug for AllowedHosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.0).finish()
    }
}

impl fmt::Display for AllowedHosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no host (its stored allowed_hosts cannot be read)");
        }
        f.write_str(&self.0.join(", "))
    }
}

/// Lower case, without the brackets of an IPv6 literal or a DNS name's trailing dot (both
/// spell the same host).
fn normalize(host: &str) -> String {
    host.trim().trim_start_matches('[').trim_end_matches(']').trim_end_matches('.').to_ascii_lowercase()
}

/// The hosts a delivery reaches, as its transport can tell from the rendered spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destinations {
    /// These hosts (a URL's host, each bootstrap broker) or host patterns (a plugin's grants).
    Hosts(Vec<String>),
    /// Not known before delivery (a plugin granted any host).
    Unknown,
}

/// Why a delivery may not carry a secret, in words for the attempt's error (never the value).
pub fn refusal(secret: &str, allowed: &AllowedHosts, destinations: &Destinations) -> Option<String> {
    match destinations {
        Destinations::Unknown => Some(format!(
            "Secret '{secret}' may only be sent to {allowed}, and where this delivery goes is not known before it is sent (its plugin may reach any host); nothing was sent."
        )),
        Destinations::Hosts(hosts) => hosts.iter().find(|h| !allowed.covers(h)).map(|host| {
            format!("Secret '{secret}' may only be sent to {allowed}; this delivery goes to {host}. Nothing was sent.")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(list: &[&str]) -> AllowedHosts {
        AllowedHosts::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn names_wildcards_and_addresses_match_as_written() {
        let allowed = hosts(&["API.example.com.", "*.hooks.example.net", "10.0.0.7", "[::1]"]);
        assert!(allowed.allows("api.example.com"));
        assert!(allowed.allows("Api.Example.Com."));
        assert!(!allowed.allows("example.com"));
        assert!(!allowed.allows("evilapi.example.com"));
        assert!(!allowed.allows("api.example.com.evil.org"));
        assert!(allowed.allows("eu.hooks.example.net"));
        assert!(allowed.allows("a.b.hooks.example.net"));
        assert!(!allowed.allows("hooks.example.net"), "a wildcard covers subdomains, not the domain");
        assert!(!allowed.allows("evilhooks.example.net"));
        assert!(allowed.allows("10.0.0.7"));
        assert!(allowed.allows("::1"));
        assert!(!allowed.allows("10.0.0.8"));
    }

    #[test]
    fn a_grant_pattern_is_covered_only_when_every_host_it_reaches_is_allowed() {
        let allowed = hosts(&["api.example.com", "*.example.net"]);
        assert!(allowed.covers("api.example.com"));
        assert!(allowed.covers("*.example.net"));
        assert!(allowed.covers("*.eu.example.net"));
        assert!(!allowed.covers("*.net"));
        assert!(!allowed.covers("*.example.com"), "an exact name does not cover its subdomains");
        assert!(!allowed.covers("*"));
    }

    #[test]
    fn bad_lists_name_the_entry() {
        let parse = |list: &[&str]| AllowedHosts::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(parse(&[]).unwrap_err().0, "allowed_hosts");
        assert_eq!(parse(&["ok.example", "https://x.example/"]).unwrap_err().0, "allowed_hosts[1]");
        assert_eq!(parse(&["x.example:443"]).unwrap_err().0, "allowed_hosts[0]");
        assert_eq!(parse(&["*"]).unwrap_err().0, "allowed_hosts[0]");
        assert_eq!(parse(&["*.10.0.0.1"]).unwrap_err().0, "allowed_hosts[0]");
        assert_eq!(parse(&["a..b"]).unwrap_err().0, "allowed_hosts[0]");
        assert_eq!(parse(&[""]).unwrap_err().0, "allowed_hosts[0]");
        let many: Vec<String> = (0..=MAX_ALLOWED_HOSTS).map(|i| format!("h{i}.example")).collect();
        assert_eq!(AllowedHosts::parse(&many).unwrap_err().0, "allowed_hosts");
        assert_eq!(
            AllowedHosts::from_json(&hosts(&["a.example", "*.b.example"]).to_json()),
            Some(hosts(&["a.example", "*.b.example"]))
        );
    }

    #[test]
    fn a_refusal_names_the_host_and_never_the_value() {
        let allowed = hosts(&["api.example.com"]);
        assert_eq!(refusal("k", &allowed, &Destinations::Hosts(vec!["api.example.com".into()])), None);
        let message = refusal("k", &allowed, &Destinations::Hosts(vec!["echo.example.org".into()])).unwrap();
        assert!(message.contains("echo.example.org") && message.contains("api.example.com"), "{message}");
        assert!(refusal("k", &allowed, &Destinations::Unknown).is_some());
        let unreadable = AllowedHosts::from_stored("not json");
        assert!(refusal("k", &unreadable, &Destinations::Hosts(vec!["api.example.com".into()])).is_some());
    }
}
