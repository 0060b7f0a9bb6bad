//! Who a client is, for the per-client limits.
//!
//! An IPv4 client is its address. An IPv6 client is its address masked to
//! a prefix (`client-ipv6-prefix`, default 64): one host usually owns a
//! whole /64 and can pick any address in it, so telling clients apart by
//! the full address would give it an unlimited supply of "clients".
//! IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, from dual-stack sockets)
//! count as the IPv4 address they carry.
//!
//! The identity is used by the connection caps ([`crate::limits`]), the job
//! caps ([`crate::admission`]) and the authentication failure delay
//! ([`crate::auth`]).

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// Default IPv6 prefix length that identifies one client.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// A client's identity for the per-client limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientId {
    network: IpAddr,
    prefix: u8,
}

impl ClientId {
    /// The identity of `addr`, with IPv6 addresses masked to `ipv6_prefix` bits
    /// (0 to 128; larger values count as 128).
    pub fn of(addr: IpAddr, ipv6_prefix: u8) -> ClientId {
        match addr {
            IpAddr::V4(v4) => ClientId {
                network: IpAddr::V4(v4),
                prefix: 32,
            },
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientId::of(IpAddr::V4(v4), ipv6_prefix),
                None => {
                    let prefix = ipv6_prefix.min(128);
                    let mask = u128::MAX.checked_shl(u32::from(128 - prefix)).unwrap_or(0);
                    ClientId {
                        network: IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask)),
                        prefix,
                    }
                }
            },
        }
    }
}

impl fmt::Display for ClientId {
    /// The address, or for IPv6 shorter than /128 the network (`2001:db8::/64`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.network {
            IpAddr::V6(_) if self.prefix < 128 => write!(f, "{}/{}", self.network, self.prefix),
            network => write!(f, "{network}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(addr: &str, prefix: u8) -> ClientId {
        ClientId::of(addr.parse().expect("address"), prefix)
    }

    #[test]
    fn an_ipv4_client_is_its_whole_address() {
        assert_eq!(id("192.0.2.1", 64), id("192.0.2.1", 0));
        assert_ne!(id("192.0.2.1", 64), id("192.0.2.2", 64));
        assert_eq!(id("192.0.2.1", 64).to_string(), "192.0.2.1");
    }

    #[test]
    fn an_ipv6_client_is_its_prefix() {
        assert_eq!(id("2001:db8:1:2::1", 64), id("2001:db8:1:2:ffff::9", 64));
        assert_ne!(id("2001:db8:1:2::1", 64), id("2001:db8:1:3::1", 64));
        assert_eq!(id("2001:db8:1:2::1", 48), id("2001:db8:1:3::1", 48));
        assert_eq!(id("2001:db8:1:2::1", 64).to_string(), "2001:db8:1:2::/64");
        assert_ne!(id("2001:db8::1", 128), id("2001:db8::2", 128));
        assert_eq!(id("2001:db8::1", 128).to_string(), "2001:db8::1");
        assert_eq!(id("2001:db8::1", 200), id("2001:db8::1", 128));
        assert_eq!(id("2001:db8::1", 0), id("fe80::1", 0));
        assert_eq!(id("2001:db8::1", 0).to_string(), "::/0");
    }

    #[test]
    fn ipv4_mapped_ipv6_is_the_ipv4_client() {
        assert_eq!(id("::ffff:192.0.2.1", 64), id("192.0.2.1", 64));
        assert_ne!(id("::ffff:192.0.2.1", 64), id("::ffff:192.0.2.2", 64));
    }
}
