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
/// Names are resolved by the proxy. A name that resolves to an address of the host (any
/// of its interfaces') or of a network that is not the public internet (loopback,
/// RFC 1918, link-local, CGNAT, unique-local, documentation, reserved, multicast,
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
/// `allow_all`): an address of one of this machine's interfaces (a public one too:
/// services listening on `0.0.0.0` answer there), or one of the ranges that are not
/// the public internet.
fn is_internal(ip: IpAddr) -> bool {
    is_special(ip) || is_host_address(ip)
}

/// Whether `ip` is one of this machine's own addresses: it can be bound here.
fn is_host_address(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Whether `ip` is in a range that is not the public internet: loopback, unspecified
/// and "this network" (`0.0.0.0/8`), RFC 1918, link-local, CGNAT, the IETF and
/// documentation ranges, benchmarking, reserved, broadcast, multicast; for IPv6 the
/// same plus unique-local, and any IPv6 form that carries an IPv4 address (mapped,
/// compatible, NAT64, 6to4) judged by that address.
fn is_special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            a == 0
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a >= 240
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && (c == 0 || c == 2))
                || (a == 198 && (b == 18 || b == 19))
                || (a == 198 && b == 51 && c == 100)
                || (a == 203 && b == 0 && c == 113)
        }
        IpAddr::V6(v6) => {
            let segments = v6.segments();
            let first = segments[0];
            if v6.is_loopback() || v6.is_unspecified() {
                return true;
            }
            // Mapped (::ffff:a.b.c.d) and compatible (::a.b.c.d).
            if let Some(v4) = v6.to_ipv4() {
                return is_special(IpAddr::V4(v4));
            }
            // NAT64 (64:ff9b::a.b.c.d).
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let [.., a, b, c, d] = v6.octets();
                return is_special(IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, d)));
            }
            // 6to4 (2002:a.b.c.d::).
            if first == 0x2002 {
                let [_, _, a, b, c, d, ..] = v6.octets();
                return is_special(IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, d)));
            }
            (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first & 0xff00) == 0xff00
                || (first == 0x2001 && segments[1] == 0x0db8)
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

    /// `allow_all` opens the public internet, not this machine: its own addresses (a
    /// public one answers for every service on `0.0.0.0`) and the ranges that are not
    /// the internet stay closed, whatever form the address is written in.
    #[tokio::test]
    async fn allow_all_reaches_neither_the_hosts_own_addresses_nor_special_ranges() {
        let open = policy(&["*"], true);
        // This machine's address on its default route, if it has one.
        let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        match probe
            .connect("198.51.100.1:9")
            .and_then(|()| probe.local_addr())
        {
            Ok(own) => {
                assert!(is_host_address(own.ip()), "{own}");
                let refused = open.decide(&own.ip().to_string(), 8080).await;
                assert!(!refused.allowed(), "{own}: {}", refused.reason);
                assert!(
                    refused.reason.contains("this machine"),
                    "{}",
                    refused.reason
                );
            }
            Err(e) => eprintln!("no default route here ({e}): the own-address case is not run"),
        }
        for host in [
            "192.0.2.2",
            "198.18.0.1",
            "0.1.2.3",
            "240.0.0.1",
            "224.0.0.1",
            "[::127.0.0.1]",
            "[64:ff9b::7f00:1]",
            "[2002:7f00:1::]",
            "[2001:db8::1]",
            "[ff02::1]",
        ] {
            let refused = open.decide(host, 80).await;
            assert!(!refused.allowed(), "{host}: {}", refused.reason);
        }
        assert!(!is_host_address("93.184.215.14".parse().unwrap()));
        assert!(open
            .decide("[2606:2800:21f:cb07:6820:80da:af6b:8b2c]", 443)
            .await
            .allowed());
    }

    #[test]
    fn an_opening_entry_needs_allow_all() {
        assert!(EgressPolicy::new(&["0.0.0.0/0".into()], false).is_err());
        assert!(EgressPolicy::new(&["0.0.0.0/0".into()], true).is_ok());
    }
}
