//! Connection limits: a cap on open connections in total and per client
//! IP address. A connection over a cap is answered with a `busy` error and
//! closed, so a flood of connections cannot exhaust descriptors or memory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionRefused {
    /// The server holds its maximum of connections.
    #[error("too many connections: the server holds its maximum of {0}")]
    Total(usize),
    /// This client address holds its maximum of connections.
    #[error("too many connections from {addr}: the limit per client is {limit}")]
    PerClient {
        /// The client's address.
        addr: IpAddr,
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
    per_client: HashMap<IpAddr, usize>,
}

/// A connection's place; released when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    addr: IpAddr,
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

    /// Takes a place for a connection from `addr`, if the caps allow.
    pub fn admit(self: &Arc<Self>, addr: IpAddr) -> Result<ConnectionSlot, ConnectionRefused> {
        let mut counts = self.lock();
        if counts.total >= self.max_total {
            return Err(ConnectionRefused::Total(self.max_total));
        }
        let from_client = counts.per_client.entry(addr).or_default();
        if *from_client >= self.max_per_client {
            return Err(ConnectionRefused::PerClient {
                addr,
                limit: self.max_per_client,
            });
        }
        *from_client += 1;
        counts.total += 1;
        Ok(ConnectionSlot {
            limits: Arc::clone(self),
            addr,
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
        if let Some(count) = counts.per_client.get_mut(&self.addr) {
            *count -= 1;
            if *count == 0 {
                counts.per_client.remove(&self.addr);
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
        let a: IpAddr = "127.0.0.1".parse().expect("ip");
        let b: IpAddr = "127.0.0.2".parse().expect("ip");
        let first = limits.admit(a).expect("first");
        let _second = limits.admit(a).expect("second");
        assert_eq!(
            limits.admit(a).unwrap_err(),
            ConnectionRefused::PerClient { addr: a, limit: 2 }
        );
        let _third = limits.admit(b).expect("another address");
        assert_eq!(limits.admit(b).unwrap_err(), ConnectionRefused::Total(3));
        drop(first);
        assert_eq!(limits.open(), 2);
        let _again = limits.admit(a).expect("a place was freed");
    }
}
