//! The egress policy of a `provision` node: which destinations a sandbox may reach
//! through the run's egress proxy.
//!
//! A rule is written as one of:
//!
//! - `pypi.org` — that host name exactly (case-insensitive, a trailing dot ignored);
//! - `*.pypi.org` — any name *under* `pypi.org` (`files.pypi.org`, `a.b.pypi.org`), not
//!   `pypi.org` itself;
//! - `10.1.2.3` or `[fd00::1]` — that IP address;
//! - `10.0.0.0/8` — any address in that network (CIDR);
//!
//! each optionally followed by `:PORT` (`127.0.0.1:8080`, `*.example.org:8443`). A rule
//! without a port allows ports 80 and 443 only ([`DEFAULT_PORTS`]).
//!
//! `*`, `*:PORT`, `0.0.0.0/0` and `::/0` would open every destination: they are only
//! accepted with `allow_all: true` ([`EgressRule::opens_everything`]).
//!
//! ```
//! use boitata_blueprint::egress::EgressRule;
//!
//! let rule = EgressRule::parse("*.pypi.org").unwrap();
//! assert!(rule.allows_name("files.pypi.org", 443));
//! assert!(!rule.allows_name("pypi.org", 443));
//! assert!(!rule.allows_name("files.pypi.org", 22));
//! let net = EgressRule::parse("127.0.0.1:8080").unwrap();
//! assert!(net.allows_ip("127.0.0.1".parse().unwrap(), 8080));
//! ```

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

/// The ports a rule without `:PORT` allows: HTTP and HTTPS.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// The `egress` field's values.
pub const EGRESS_MODES: &[&str] = &["none", "gateway", "allow"];

/// What a rule's host part matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Every destination (`*`).
    Any,
    /// One host name, lower-case, without a trailing dot.
    Name(String),
    /// Every name under this domain (`*.DOMAIN`), lower-case.
    Subdomains(String),
    /// Every address in a network (an address alone is a /32 or /128).
    Network(IpNet),
}

/// One `allow` entry of an egress policy. See the module docs for the syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRule {
    /// The hosts it matches.
    pub host: HostPattern,
    /// The port it allows; `None` means [`DEFAULT_PORTS`].
    pub port: Option<u16>,
    text: String,
}

/// An `allow` entry that is not a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("allow entry {entry:?}: {reason}")]
pub struct EgressRuleError {
    /// The entry as written.
    pub entry: String,
    /// What is wrong and what to write instead.
    pub reason: String,
}

impl EgressRule {
    /// Parses one `allow` entry.
    ///
    /// # Errors
    /// [`EgressRuleError`] naming the entry and what is wrong (an empty entry, a bad
    /// port, a malformed CIDR, a `*` anywhere but as the whole first label).
    pub fn parse(entry: &str) -> Result<EgressRule, EgressRuleError> {
        let text = entry.trim();
        let error = |reason: &str| EgressRuleError {
            entry: entry.to_owned(),
            reason: reason.to_owned(),
        };
        if text.is_empty() {
            return Err(error(
                "empty: write a host (pypi.org), a pattern (*.pypi.org), host:port or a CIDR",
            ));
        }
        let (host, port) = split_port(text).map_err(|reason| error(&reason))?;
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let pattern = if host == "*" {
            HostPattern::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            check_name(domain).map_err(|reason| error(&reason))?;
            HostPattern::Subdomains(domain.to_owned())
        } else if host.contains('/') {
            let net = IpNet::from_str(&host)
                .map_err(|_| error("not a CIDR network: write it like 10.0.0.0/8 or fd00::/8"))?;
            HostPattern::Network(net.trunc())
        } else if let Ok(ip) = host.parse::<IpAddr>() {
            HostPattern::Network(IpNet::from(ip))
        } else {
            check_name(&host).map_err(|reason| error(&reason))?;
            HostPattern::Name(host)
        };
        Ok(EgressRule {
            host: pattern,
            port,
            text: text.to_owned(),
        })
    }

    /// Whether the rule would allow every destination or a sweep of them that no
    /// policy means by accident, which needs `allow_all: true`: `*`; a network wider
    /// than an IPv4 `/8` or an IPv6 `/7` (`0.0.0.0/0`, `0.0.0.0/1` + `128.0.0.0/1`,
    /// `::/0`, `2000::/3`; `10.0.0.0/8` and `fc00::/7` stay allowed); every name under
    /// a top-level domain (`*.com`).
    pub fn opens_everything(&self) -> bool {
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Network(IpNet::V4(net)) => net.prefix_len() < 8,
            HostPattern::Network(IpNet::V6(net)) => net.prefix_len() < 7,
            HostPattern::Subdomains(domain) => !domain.trim_end_matches('.').contains('.'),
            HostPattern::Name(_) => false,
        }
    }

    fn allows_port(&self, port: u16) -> bool {
        match self.port {
            Some(allowed) => allowed == port,
            None => DEFAULT_PORTS.contains(&port),
        }
    }

    /// Whether the rule allows host name `name` (lower-cased here) on `port`. A
    /// network rule allows no name (the name's addresses are checked with
    /// [`EgressRule::allows_ip`]).
    pub fn allows_name(&self, name: &str, port: u16) -> bool {
        if !self.allows_port(port) {
            return false;
        }
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Name(exact) => *exact == name,
            HostPattern::Subdomains(domain) => name
                .strip_suffix(domain.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            HostPattern::Network(_) => false,
        }
    }

    /// Whether the rule allows address `ip` on `port` (only `*` and network rules
    /// allow addresses).
    pub fn allows_ip(&self, ip: IpAddr, port: u16) -> bool {
        if !self.allows_port(port) {
            return false;
        }
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Network(net) => net.contains(&ip),
            HostPattern::Name(_) | HostPattern::Subdomains(_) => false,
        }
    }
}

impl fmt::Display for EgressRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `host[:port]`, `[v6]:port`, or a bare IPv6 address / network.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let parse_port = |p: &str| -> Result<u16, String> {
        match p.parse::<u16>() {
            Ok(port) if port > 0 => Ok(port),
            _ => Err(format!("port {p:?} is not a TCP port (1-65535)")),
        }
    };
    if let Some(rest) = text.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err("an IPv6 address opened with '[' has no ']'".into());
        };
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(parse_port(port)?))),
                None => Err("expected :PORT after ']'".into()),
            },
        };
    }
    match text.matches(':').count() {
        0 => Ok((text, None)),
        1 => {
            let (host, port) = text.split_once(':').unwrap_or((text, ""));
            Ok((host, Some(parse_port(port)?)))
        }
        // A bare IPv6 address or network: no port (write [v6]:port for one).
        _ => Ok((text, None)),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if ok {
        Ok(())
    } else {
        Err("not a host name: write letters, digits, '-' and '.', with '*.' only as a prefix (*.pypi.org)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> EgressRule {
        EgressRule::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn names_patterns_addresses_and_networks_match_what_they_say() {
        let exact = rule("PyPI.org.");
        assert!(exact.allows_name("pypi.org", 443));
        assert!(exact.allows_name("pypi.org", 80));
        assert!(!exact.allows_name("pypi.org", 8080));
        assert!(!exact.allows_name("evilpypi.org", 443));

        let under = rule("*.pypi.org");
        assert!(under.allows_name("files.pypi.org", 443));
        assert!(under.allows_name("a.b.pypi.org", 443));
        assert!(!under.allows_name("pypi.org", 443));
        assert!(!under.allows_name("evilpypi.org", 443));

        let port = rule("127.0.0.1:8080");
        assert!(port.allows_ip("127.0.0.1".parse().unwrap(), 8080));
        assert!(!port.allows_ip("127.0.0.1".parse().unwrap(), 8081));
        assert!(!port.allows_name("localhost", 8080));

        let net = rule("10.0.0.0/8:5432");
        assert!(net.allows_ip("10.200.0.1".parse().unwrap(), 5432));
        assert!(!net.allows_ip("11.0.0.1".parse().unwrap(), 5432));

        let v6 = rule("[fd00::1]:53");
        assert!(v6.allows_ip("fd00::1".parse().unwrap(), 53));
        assert!(rule("fd00::/8").allows_ip("fd12::1".parse().unwrap(), 443));
    }

    #[test]
    fn everything_openers_are_recognised_and_bad_entries_refused() {
        for open in [
            "*",
            "*:443",
            "0.0.0.0/0",
            "::/0",
            "[::/0]:80",
            "0.0.0.0/1",
            "128.0.0.0/1",
            "64.0.0.0/7",
            "2000::/3",
            "*.com",
            "*.org:443",
        ] {
            assert!(rule(open).opens_everything(), "{open}");
        }
        for narrow in [
            "10.0.0.0/8",
            "fc00::/7",
            "*.pypi.org",
            "pypi.org",
            "10.1.2.3",
        ] {
            assert!(!rule(narrow).opens_everything(), "{narrow}");
        }
        for bad in [
            "",
            "a.*.org",
            "host:0",
            "host:http",
            "10.0.0.0/33",
            "[::1",
            "ex ample.org",
        ] {
            let err = EgressRule::parse(bad).expect_err(bad);
            assert_eq!(err.entry, bad);
        }
    }
}
