//! The egress proxy: the only way out of a run network, and only where the policy says.
//!
//! A sandbox provisioned with `egress: allow` gets `HTTP_PROXY`/`HTTPS_PROXY` pointing
//! at an [`EgressProxy`] the orchestrator runs on the run network's gateway address. The
//! proxy speaks plain HTTP forward proxying (`GET http://host/…`) and `CONNECT`
//! tunnels; it matches the host and port asked for against the [`EgressPolicy`],
//! resolves the name itself and connects only to the addresses it checked. A refusal
//! is a `403` whose body says why. Inside a `CONNECT` tunnel that carries TLS, the
//! ClientHello's SNI must name the host the tunnel was opened for (else the tunnel is
//! closed): a client cannot open a tunnel to one name and speak to another. Every
//! decision becomes an `egress` event of the run.
//!
//! A program that ignores the proxy variables has no route at all: the run network is
//! internal and the host's rules drop everything but the allowed ports.

mod proxy;

use std::net::{IpAddr, SocketAddr};

use boitata_blueprint::egress::EgressRule;

pub use proxy::EgressProxy;

/// What a sandbox may reach through the proxy: `allow` rules, or everything with
/// `allow_all`.
///
/// Names are resolved by the proxy. A name that resolves to an address of the host or
/// of a private network (loopback, RFC 1918, link-local, CGNAT, unique-local,
/// unspecified) is refused unless an address or network rule names that address, even
/// with `allow_all`: a public name must not lead back into the host.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EgressPolicy {
    /// The allowed destinations.
    pub rules: Vec<EgressRule>,
    /// Every destination (but the host's and private addresses, see above).
    pub allow_all: bool,
}

/// A decision of the [`EgressPolicy`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Where to connect, when allowed.
    pub address: Option<SocketAddr>,
    /// The rule that allowed it, or why it was refused.
    pub reason: String,
}

impl Decision {
    fn refused(reason: String) -> Decision {
        Decision {
            address: None,
            reason,
        }
    }

    /// Whether the connection is allowed.
    pub fn allowed(&self) -> bool {
        self.address.is_some()
    }
}

impl EgressPolicy {
    /// A policy from `allow` entries, each parsed with [`EgressRule::parse`].
    ///
    /// # Errors
    /// The first entry that is not a rule; an entry that opens everything without
    /// `allow_all` (validation refuses both first; this is the last check).
    pub fn new(allow: &[String], allow_all: bool) -> Result<EgressPolicy, String> {
        let mut rules = Vec::new();
        for entry in allow {
            let rule = EgressRule::parse(entry).map_err(|e| e.to_string())?;
            if rule.opens_everything() && !allow_all {
                return Err(format!(
                    "allow entry {entry:?} opens every destination: set allow_all: true to mean it"
                ));
            }
            rules.push(rule);
        }
        Ok(EgressPolicy { rules, allow_all })
    }

    /// Decides on a connection to `host` (a name or an address, as the client wrote
    /// it) and `port`, resolving names with the system's resolver.
    pub async fn decide(&self, host: &str, port: u16) -> Decision {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.decide_address(ip, port, None);
        }
        let name_rule = self.rules.iter().find(|r| r.allows_name(host, port));
        let addresses: Vec<SocketAddr> = match tokio::net::lookup_host((host, port)).await {
            Ok(found) => found.collect(),
            Err(e) => {
                if name_rule.is_none() && !self.allow_all {
                    return Decision::refused(not_allowed(host, port));
                }
                return Decision::refused(format!("{host} cannot be resolved: {e}"));
            }
        };
        let Some(first) = addresses.first().copied() else {
            return Decision::refused(format!("{host} has no address"));
        };
        match name_rule {
            Some(rule) => {
                // The name is allowed; its address must not lead into the host.
                if is_internal(first.ip()) && !self.address_rule(first.ip(), port) {
                    return Decision::refused(format!(
                        "{host} resolves to {}, an address of this machine or a private \
                         network: allow that address explicitly to mean it",
                        first.ip()
                    ));
                }
                Decision {
                    address: Some(first),
                    reason: format!("allowed by {rule}"),
                }
            }
            None => self.decide_address(first.ip(), port, Some(host)),
        }
    }

    fn address_rule(&self, ip: IpAddr, port: u16) -> bool {
        self.rules
            .iter()
            .any(|r| !r.opens_everything() && r.allows_ip(ip, port))
    }

    fn decide_address(&self, ip: IpAddr, port: u16, name: Option<&str>) -> Decision {
        let shown = name.unwrap_or("");
        if let Some(rule) = self
            .rules
            .iter()
            .find(|r| !r.opens_everything() && r.allows_ip(ip, port))
        {
            return Decision {
                address: Some(SocketAddr::new(ip, port)),
                reason: format!("allowed by {rule}"),
            };
        }
        let open = self.allow_all || self.rules.iter().any(|r| r.allows_ip(ip, port));
        if open {
            if is_internal(ip) {
                return Decision::refused(format!(
                    "{ip} is an address of this machine or a private network: allow it \
                     explicitly to mean it"
                ));
            }
            return Decision {
                address: Some(SocketAddr::new(ip, port)),
                reason: "allowed by allow_all".into(),
            };
        }
        if shown.is_empty() {
            Decision::refused(not_allowed(&ip.to_string(), port))
        } else {
            Decision::refused(not_allowed(shown, port))
        }
    }
}

fn not_allowed(host: &str, port: u16) -> String {
    format!("{host}:{port} is not in the node's egress allow list")
}

/// Whether `ip` is the host's or a private network's (never reached by a name rule or
/// `allow_all`).
fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_unspecified()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], allow_all: bool) -> EgressPolicy {
        let allow: Vec<String> = allow.iter().map(|s| (*s).to_owned()).collect();
        EgressPolicy::new(&allow, allow_all).unwrap()
    }

    #[tokio::test]
    async fn addresses_are_allowed_by_their_rules_and_the_host_only_explicitly() {
        let p = policy(&["127.0.0.1:8080", "10.0.0.0/8"], false);
        assert!(p.decide("127.0.0.1", 8080).await.allowed());
        let refused = p.decide("127.0.0.1", 8081).await;
        assert!(!refused.allowed());
        assert!(
            refused.reason.contains("127.0.0.1:8081"),
            "{}",
            refused.reason
        );
        assert!(p.decide("10.1.2.3", 443).await.allowed());
        assert!(!p.decide("10.1.2.3", 22).await.allowed());

        let open = policy(&["*"], true);
        assert!(!open.decide("127.0.0.1", 80).await.allowed());
        assert!(!open.decide("192.168.1.1", 443).await.allowed());
        assert!(open.decide("93.184.215.14", 443).await.allowed());
    }

    #[tokio::test]
    async fn a_name_is_refused_when_it_resolves_into_the_host() {
        // `localhost` resolves to loopback without any network.
        let p = policy(&["localhost:8080"], false);
        let refused = p.decide("localhost", 8080).await;
        assert!(!refused.allowed());
        assert!(
            refused.reason.contains("this machine"),
            "{}",
            refused.reason
        );
        let explicit = policy(&["localhost:8080", "127.0.0.0/8:8080", "[::1]:8080"], false);
        assert!(explicit.decide("localhost", 8080).await.allowed());
        assert!(!policy(&["example.org"], false)
            .decide("localhost", 80)
            .await
            .allowed());
    }

    #[test]
    fn an_opening_entry_needs_allow_all() {
        assert!(EgressPolicy::new(&["0.0.0.0/0".into()], false).is_err());
        assert!(EgressPolicy::new(&["0.0.0.0/0".into()], true).is_ok());
    }
}
