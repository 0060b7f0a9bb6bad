//! Connection limits: a cap on open connections in total and per client
//! ([`ClientId`]: an IPv4 address or an IPv6 prefix). A connection over a
//! cap is answered with a `busy` error and closed, so a flood of
//! connections cannot exhaust descriptors or memory.
//!
//! Over the total cap, an idle connection makes room first: a session
//! marks its connection idle while it waits for the next job
//! ([`ConnectionSlot::set_idle`]), and a newcomer at the cap takes the
//! place of an idle connection of the client holding the most connections
//! (more than the newcomer's client), which is told through
//! [`ConnectionSlot::evicted`] and closed with `busy`. Connections with a
//! job running, and metrics scrapes, are never closed for room.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use crate::client_id::ClientId;

/// Why a connection was refused, or closed to make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionRefused {
    /// The server holds its maximum of connections.
    #[error("too many connections: the server holds its maximum of {0}")]
    Total(usize),
    /// This client holds its maximum of connections.
    #[error("too many connections from {client}: the limit per client is {limit}")]
    PerClient {
        /// The client (address or IPv6 prefix).
        client: ClientId,
        /// The per-client cap.
        limit: usize,
    },
    /// This idle connection was closed to make room for another client's:
    /// the server was at its maximum and this client held the most.
    #[error(
        "closed to make room: the server holds its maximum of {limit} connections and \
         {client}, with {held} of them, had this one idle; reconnect when needed"
    )]
    Evicted {
        /// The client whose connection was closed.
        client: ClientId,
        /// Its connections, this one included.
        held: usize,
        /// The total cap.
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
    per_client: HashMap<ClientId, usize>,
    next_id: u64,
    /// Idle connections by id (oldest first): their client and how to
    /// close them.
    idle: BTreeMap<u64, (ClientId, Arc<Eviction>)>,
}

/// How an idle connection learns it was closed for room.
#[derive(Debug, Default)]
struct Eviction {
    token: CancellationToken,
    why: Mutex<Option<ConnectionRefused>>,
}

/// A connection's place; released when dropped.
#[derive(Debug)]
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    client: ClientId,
    id: u64,
    eviction: Arc<Eviction>,
}

impl Counts {
    fn release(&mut self, client: ClientId) {
        self.total -= 1;
        if let Some(count) = self.per_client.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                self.per_client.remove(&client);
            }
        }
    }
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

    /// Takes a place for a connection from `client`, if the caps allow;
    /// at the total cap, by closing an idle connection of the client with
    /// the most connections (see the module).
    pub fn admit(self: &Arc<Self>, client: ClientId) -> Result<ConnectionSlot, ConnectionRefused> {
        let mut counts = self.lock();
        let mine = counts.per_client.get(&client).copied().unwrap_or(0);
        if mine >= self.max_per_client {
            return Err(ConnectionRefused::PerClient {
                client,
                limit: self.max_per_client,
            });
        }
        if counts.total >= self.max_total && !self.evict_for(&mut counts, client, mine) {
            return Err(ConnectionRefused::Total(self.max_total));
        }
        *counts.per_client.entry(client).or_default() += 1;
        counts.total += 1;
        let id = counts.next_id;
        counts.next_id += 1;
        Ok(ConnectionSlot {
            limits: Arc::clone(self),
            client,
            id,
            eviction: Arc::default(),
        })
    }

    /// Closes the oldest idle connection of the client with the most
    /// connections, if it holds more than `mine` (the newcomer's client's)
    /// and is another client. Returns whether a place was freed.
    fn evict_for(&self, counts: &mut Counts, client: ClientId, mine: usize) -> bool {
        let heaviest = counts
            .idle
            .values()
            .map(|(owner, _)| *owner)
            .filter(|owner| *owner != client)
            .max_by_key(|owner| counts.per_client.get(owner).copied().unwrap_or(0));
        let Some(victim) = heaviest else {
            return false;
        };
        let held = counts.per_client.get(&victim).copied().unwrap_or(0);
        if held <= mine {
            return false;
        }
        let Some(id) = counts
            .idle
            .iter()
            .find(|(_, (owner, _))| *owner == victim)
            .map(|(id, _)| *id)
        else {
            return false;
        };
        let Some((_, eviction)) = counts.idle.remove(&id) else {
            return false;
        };
        counts.release(victim);
        *eviction.why.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(ConnectionRefused::Evicted {
                client: victim,
                held,
                limit: self.max_total,
            });
        eviction.token.cancel();
        true
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().total
    }
}

impl ConnectionSlot {
    /// Marks the connection idle (waiting for its next job: it may be
    /// closed to make room) or busy (a job runs: it is never closed for
    /// room). A connection starts busy.
    pub fn set_idle(&self, idle: bool) {
        let mut counts = self.limits.lock();
        if self.eviction.token.is_cancelled() {
            return;
        }
        if idle {
            counts
                .idle
                .insert(self.id, (self.client, Arc::clone(&self.eviction)));
        } else {
            counts.idle.remove(&self.id);
        }
    }

    /// Resolves when the connection was closed to make room, with the
    /// reason to tell the client; its place is free already.
    pub async fn evicted(&self) -> ConnectionRefused {
        self.eviction.token.cancelled().await;
        self.eviction
            .why
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or(ConnectionRefused::Total(self.limits.max_total))
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        if self.eviction.token.is_cancelled() {
            // Its place went to another connection already.
            return;
        }
        let mut counts = self.limits.lock();
        counts.idle.remove(&self.id);
        counts.release(self.client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_apply_in_total_and_per_address_and_free_on_drop() {
        let limits = ConnectionLimits::new(3, 2);
        let a = ClientId::of("127.0.0.1".parse().expect("ip"), 64);
        let b = ClientId::of("127.0.0.2".parse().expect("ip"), 64);
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
    fn at_the_cap_an_idle_connection_of_the_heaviest_client_makes_room() {
        let limits = ConnectionLimits::new(3, 10);
        let key = |n: u8| ClientId::of([127, 0, 0, n].into(), 64);
        let busy_one = limits.admit(key(1)).expect("1");
        let idle_one = limits.admit(key(1)).expect("2");
        let idle_two = limits.admit(key(2)).expect("3");
        // Nothing idle: the cap refuses.
        assert_eq!(
            limits.admit(key(3)).unwrap_err(),
            ConnectionRefused::Total(3)
        );
        idle_one.set_idle(true);
        idle_two.set_idle(true);
        let _newcomer = limits.admit(key(3)).expect("room made");
        assert_eq!(limits.open(), 3);
        let now = |slot: &ConnectionSlot| {
            let mut future = std::pin::pin!(slot.evicted());
            let mut context = std::task::Context::from_waker(std::task::Waker::noop());
            match future.as_mut().poll(&mut context) {
                std::task::Poll::Ready(why) => Some(why),
                std::task::Poll::Pending => None,
            }
        };
        assert_eq!(
            now(&idle_one),
            Some(ConnectionRefused::Evicted {
                client: key(1),
                held: 2,
                limit: 3
            })
        );
        assert!(now(&idle_two).is_none() && now(&busy_one).is_none());
        drop(idle_one);
        assert_eq!(limits.open(), 3, "an evicted place is not freed twice");
        // 127.0.0.2's idle connection is one more than a newcomer's none.
        let _fourth = limits.admit(key(4)).expect("room made again");
        assert!(now(&idle_two).is_some());
        // No idle connection left: the cap refuses.
        assert_eq!(
            limits.admit(key(5)).unwrap_err(),
            ConnectionRefused::Total(3)
        );
        drop(busy_one);
        let _fifth = limits.admit(key(5)).expect("a freed place");
    }

    #[test]
    fn one_ipv6_prefix_is_one_client() {
        let limits = ConnectionLimits::new(10, 1);
        let key = |addr: &str| ClientId::of(addr.parse().expect("ip"), 64);
        let _first = limits.admit(key("2001:db8:0:1::1")).expect("first");
        assert!(matches!(
            limits.admit(key("2001:db8:0:1::2")),
            Err(ConnectionRefused::PerClient { .. })
        ));
        let _other = limits.admit(key("2001:db8:0:2::1")).expect("other /64");
    }
}
