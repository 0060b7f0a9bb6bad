//! IP networks in CIDR notation, and lists of them: the `trusted-proxies`
//! setting (networks whose connections must start with a PROXY protocol
//! header) and `metrics-allow` (networks that may scrape the metrics).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// One IPv4 or IPv6 network, e.g. `10.0.0.0/8` or `::1/128`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// A CIDR that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// The address part is not an IP address.
    #[error("`{text}`: `{address}` is not an IP address")]
    Address {
        /// The whole CIDR as given.
        text: String,
        /// The address part.
        address: String,
    },
    /// The prefix length is not a number or too long for the family.
    #[error("`{text}`: the prefix length must be 0 to {max}")]
    Prefix {
        /// The whole CIDR as given.
        text: String,
        /// 32 for IPv4, 128 for IPv6.
        max: u8,
    },
    /// Bits are set past the prefix (`10.0.0.1/8`): probably a typo.
    #[error(
        "`{text}`: host bits are set past the /{prefix} prefix (did you mean {network}/{prefix}?)"
    )]
    HostBits {
        /// The whole CIDR as given.
        text: String,
        /// The prefix length.
        prefix: u8,
        /// The network with the host bits cleared.
        network: IpAddr,
    },
}

impl Cidr {
    /// Whether `addr` is inside the network. IPv4-mapped IPv6 addresses
    /// (`::ffff:10.1.2.3`, as a dual-stack listener sees IPv4 peers)
    /// count as their IPv4 address.
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.network, addr.to_canonical()) {
            (IpAddr::V4(network), IpAddr::V4(addr)) => {
                mask(u32::from(network).into(), self.prefix, 32)
                    == mask(u32::from(addr).into(), self.prefix, 32)
            }
            (IpAddr::V6(network), IpAddr::V6(addr)) => {
                mask(u128::from(network), self.prefix, 128)
                    == mask(u128::from(addr), self.prefix, 128)
            }
            _ => false,
        }
    }
}

/// `bits` (an address of `width` bits) with everything past `prefix`
/// cleared.
fn mask(bits: u128, prefix: u8, width: u8) -> u128 {
    match prefix {
        0 => 0,
        prefix => bits >> (width - prefix) << (width - prefix),
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    /// `ADDR/PREFIX`, or a bare address (a network of one host).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address.parse().map_err(|_| CidrError::Address {
            text: text.to_owned(),
            address: address.to_owned(),
        })?;
        let (width, bits) = match network {
            IpAddr::V4(v4) => (32u8, u128::from(u32::from(v4))),
            IpAddr::V6(v6) => (128u8, u128::from(v6)),
        };
        let prefix = match prefix {
            None => width,
            Some(digits) => Some(digits)
                .filter(|digits| digits.bytes().all(|byte| byte.is_ascii_digit()))
                .and_then(|digits| digits.parse::<u8>().ok())
                .filter(|prefix| *prefix <= width)
                .ok_or_else(|| CidrError::Prefix {
                    text: text.to_owned(),
                    max: width,
                })?,
        };
        let masked = mask(bits, prefix, width);
        if masked != bits {
            let network = match network {
                IpAddr::V4(_) => IpAddr::V4((masked as u32).into()),
                IpAddr::V6(_) => IpAddr::V6(masked.into()),
            };
            return Err(CidrError::HostBits {
                text: text.to_owned(),
                prefix,
                network,
            });
        }
        // `::ffff:a.b.c.d/N` is an IPv4 network (the client addresses it
        // is compared with are IPv4 once canonical): keep it as one.
        if let IpAddr::V6(v6) = network
            && let Some(v4) = v6.to_ipv4_mapped()
            && prefix >= 96
        {
            return Ok(Cidr {
                network: IpAddr::V4(v4),
                prefix: prefix - 96,
            });
        }
        Ok(Cidr { network, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// A list of networks (`CIDR[,CIDR...]`); the empty list holds no address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CidrList(Vec<Cidr>);

/// The networks of `trusted-proxies`; empty when no proxy is trusted.
pub type TrustedProxies = CidrList;

impl CidrList {
    /// Whether `addr` is in one of the networks (for `trusted-proxies`:
    /// whether a connection from `addr` comes from a trusted proxy).
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.0.iter().any(|cidr| cidr.contains(addr))
    }

    /// Whether the list is empty (no proxy is trusted).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As `trusted-proxies`: a warning for each network that trusts a
    /// whole address family (`0.0.0.0/0`, `::/0`): every client there may
    /// say it is any address it likes, which defeats the per-client limits
    /// and the log.
    pub fn warnings(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|cidr| cidr.prefix == 0)
            .map(|cidr| {
                format!(
                    "warning: trusted-proxies {cidr} trusts every {} address: any client there may claim any address in a PROXY header (name the proxies' own addresses)",
                    if cidr.network.is_ipv4() { "IPv4" } else { "IPv6" }
                )
            })
            .collect()
    }
}

impl FromStr for CidrList {
    type Err = CidrError;

    /// A comma-separated list (spaces around commas allowed); the empty
    /// string is the empty list.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .map(str::parse)
            .collect::<Result<Vec<_>, _>>()
            .map(CidrList)
    }
}

impl fmt::Display for CidrList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, cidr) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{cidr}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("ip")
    }

    #[test]
    fn networks_contain_their_addresses_only() {
        let proxies: TrustedProxies = "127.0.0.1/32, 10.0.0.0/8,fd00::/8".parse().expect("valid");
        assert!(proxies.contains(ip("127.0.0.1")));
        assert!(!proxies.contains(ip("127.0.0.2")));
        assert!(proxies.contains(ip("10.255.1.2")));
        assert!(!proxies.contains(ip("11.0.0.1")));
        assert!(proxies.contains(ip("fd12::1")));
        assert!(!proxies.contains(ip("fe80::1")));
        assert!(proxies.contains(ip("::ffff:10.1.2.3")), "IPv4-mapped");
        assert_eq!(proxies.to_string(), "127.0.0.1/32,10.0.0.0/8,fd00::/8");
        let reparsed: TrustedProxies = proxies.to_string().parse().expect("round trip");
        assert_eq!(reparsed, proxies);
    }

    #[test]
    fn bare_addresses_zero_prefixes_and_the_empty_list() {
        let one: Cidr = "192.168.1.5".parse().expect("bare");
        assert_eq!(one.to_string(), "192.168.1.5/32");
        let all: Cidr = "0.0.0.0/0".parse().expect("everything");
        assert!(all.contains(ip("8.8.8.8")) && !all.contains(ip("::1")));
        let none: TrustedProxies = "".parse().expect("empty");
        assert!(none.is_empty() && !none.contains(ip("127.0.0.1")));
    }

    #[test]
    fn ipv4_mapped_networks_match_their_ipv4_addresses() {
        let proxies: TrustedProxies = "::ffff:10.1.2.3/128, ::ffff:192.168.0.0/112"
            .parse()
            .expect("valid");
        assert!(proxies.contains(ip("10.1.2.3")));
        assert!(proxies.contains(ip("::ffff:10.1.2.3")));
        assert!(!proxies.contains(ip("10.1.2.4")));
        assert!(proxies.contains(ip("192.168.7.9")));
        assert!(!proxies.contains(ip("192.169.0.1")));
        assert_eq!(proxies.to_string(), "10.1.2.3/32,192.168.0.0/16");
    }

    #[test]
    fn whole_families_are_warned_about() {
        let proxies: TrustedProxies = "0.0.0.0/0,::/0,10.0.0.0/8".parse().expect("valid");
        let warnings = proxies.warnings();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("0.0.0.0/0") && warnings[0].contains("every IPv4"));
        assert!(warnings[1].contains("::/0") && warnings[1].contains("every IPv6"));
        let narrow: TrustedProxies = "10.0.0.0/8,::1".parse().expect("valid");
        assert!(narrow.warnings().is_empty());
    }

    #[test]
    fn mistakes_are_named() {
        assert!(matches!(
            "10.0.0.0/33".parse::<Cidr>(),
            Err(CidrError::Prefix { max: 32, .. })
        ));
        assert!(matches!(
            "10.0.0.0/+8".parse::<Cidr>(),
            Err(CidrError::Prefix { .. })
        ));
        assert!(matches!(
            "example.com/8".parse::<Cidr>(),
            Err(CidrError::Address { .. })
        ));
        let err = "10.1.2.3/8".parse::<Cidr>().unwrap_err();
        assert!(err.to_string().contains("10.0.0.0/8"), "{err}");
    }
}
