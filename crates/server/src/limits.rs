//! Connection limits: a cap on open connections in total and per client
//! ([`ClientKey`]: an IPv4 address or an IPv6 prefix). A connection over a
//! cap is answered with a `busy` error and closed, so a flood of
//! connections cannot exhaust descriptors or memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::client_key::ClientKey;

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionRefused {
    /// The server holds its maximum of connections.
    #[error("too many connections: the server holds its maximum of {0}")]
    Total(usize),
    /// This client holds its maximum of connections.
    #[error("too many connections from {client}: the limit per client is {limit}")]
    PerClient {
        /// The client (address or IPv6 prefix).
        client: ClientKey,
        /// The per-client cap.
        limit: usize,
    },
}

/// Counts open connections, in total and per client address.
#[derive(Debug)]
pub struct ConnectionLimits {
    max_total: usize,
    max_per_client: usize,
    state: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_client: HashMap<ClientKey, usize>,
}

/// A connection's place; released when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    client: ClientKey,
}

impl ConnectionLimits {
    /// Limits of `max_total` connections, `max_per_client` per address.
    pub fn new(max_total: usize, max_per_client: usize) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            max_total,
            max_per_client,
            state: Mutex::new(Counts::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes a place for a connection from `client`, if the caps allow.
    pub fn admit(self: &Arc<Self>, client: ClientKey) -> Result<ConnectionSlot, ConnectionRefused> {
        let mut counts = self.lock();
        if counts.total >= self.max_total {
            return Err(ConnectionRefused::Total(self.max_total));
        }
        let from_client = counts.per_client.entry(client).or_default();
        if *from_client >= self.max_per_client {
            return Err(ConnectionRefused::PerClient {
                client,
                limit: self.max_per_client,
            });
        }
        *from_client += 1;
        counts.total += 1;
        Ok(ConnectionSlot {
            limits: Arc::clone(self),
            client,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().total
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self.limits.lock();
        counts.total -= 1;
        if let Some(count) = counts.per_client.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                counts.per_client.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_apply_in_total_and_per_address_and_free_on_drop() {
        let limits = ConnectionLimits::new(3, 2);
        let a = ClientKey::of("127.0.0.1".parse().expect("ip"), 64);
        let b = ClientKey::of("127.0.0.2".parse().expect("ip"), 64);
        let first = limits.admit(a).expect("first");
        let _second = limits.admit(a).expect("second");
        assert_eq!(
            limits.admit(a).unwrap_err(),
            ConnectionRefused::PerClient {
                client: a,
                limit: 2
            }
        );
        let _third = limits.admit(b).expect("another address");
        assert_eq!(limits.admit(b).unwrap_err(), ConnectionRefused::Total(3));
        drop(first);
        assert_eq!(limits.open(), 2);
        let _again = limits.admit(a).expect("a place was freed");
    }

    #[test]
    fn one_ipv6_prefix_is_one_client() {
        let limits = ConnectionLimits::new(10, 1);
        let key = |addr: &str| ClientKey::of(addr.parse().expect("ip"), 64);
        let _first = limits.admit(key("2001:db8:0:1::1")).expect("first");
        assert!(matches!(
            limits.admit(key("2001:db8:0:1::2")),
            Err(ConnectionRefused::PerClient { .. })
        ));
        let _other = limits.admit(key("2001:db8:0:2::1")).expect("other /64");
    }
}
