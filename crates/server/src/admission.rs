//! Admission control: a bounded number of active jobs behind a bounded
//! FIFO queue, with caps per client.
//!
//! [`Admission::enter`] admits a job at once when a slot is free and its
//! client is under its share, queues it otherwise, and refuses it
//! ([`Refused`]) when the queue, or the client's part of it, is full: a
//! client never hangs on a full server. Waiting jobs see their position
//! change as the queue moves. Dropping a [`Permit`] frees the slot and
//! admits the first waiter whose client is under its active cap; dropping
//! a [`Ticket`] (a client that left the queue) removes it and moves
//! everyone behind it up.
//!
//! Per-client caps keep one client (a [`ClientKey`]) from taking every
//! slot and queue place: it holds at most `max_active_per_client` slots
//! (its further jobs wait, and jobs of other clients behind them in the
//! queue pass them) and `max_queued_per_client` queue places.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{oneshot, watch};

use crate::client_key::ClientKey;

/// Why a job was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// All slots are taken and the queue is at its bound.
    #[error("server busy: {active} jobs active and {waiting} waiting (queue bound reached)")]
    Busy {
        /// Jobs holding a slot.
        active: usize,
        /// Jobs waiting.
        waiting: usize,
    },
    /// The client cannot take a slot now and already has its maximum of
    /// jobs waiting.
    #[error(
        "server busy for {client}: it has {active} jobs active (limit {active_limit}) and \
         {waiting} waiting (limit per client {waiting_limit})"
    )]
    PerClient {
        /// The client.
        client: ClientKey,
        /// Its jobs holding a slot.
        active: usize,
        /// Its cap on those (`max-active-per-client`).
        active_limit: usize,
        /// Its jobs waiting.
        waiting: usize,
        /// Its cap on those (`max-queued-per-client`).
        waiting_limit: usize,
    },
}

impl Refused {
    /// The `reason` label of `aesd_jobs_refused_total`: `queue_full`,
    /// `per_client_active` (the client holds its maximum of slots and
    /// cannot queue more), or `per_client_queued` (slots were taken by
    /// others and the client's queue places are used up).
    pub fn reason(&self) -> &'static str {
        match self {
            Refused::Busy { .. } => "queue_full",
            Refused::PerClient {
                active,
                active_limit,
                ..
            } if active >= active_limit => "per_client_active",
            Refused::PerClient { .. } => "per_client_queued",
        }
    }
}

/// Counts at one moment, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occupancy {
    /// Jobs holding a slot.
    pub active: usize,
    /// Jobs waiting in the queue.
    pub waiting: usize,
}

/// Caps that apply to each client separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerClientCaps {
    /// Slots one client may hold (at least one).
    pub active: usize,
    /// Queue places one client may hold.
    pub waiting: usize,
}

/// The admission controller shared by all connections.
#[derive(Debug)]
pub struct Admission {
    max_active: usize,
    max_waiting: usize,
    per_client: PerClientCaps,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    active: usize,
    next_id: u64,
    waiting: VecDeque<Waiter>,
    clients: HashMap<ClientKey, ClientCounts>,
}

/// One client's jobs; removed from the map when both are zero.
#[derive(Debug, Default, Clone, Copy)]
struct ClientCounts {
    active: usize,
    waiting: usize,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    client: ClientKey,
    position: watch::Sender<u32>,
    admit: oneshot::Sender<Permit>,
}

/// A job's right to run; the slot is freed when it is dropped.
#[derive(Debug)]
pub struct Permit {
    admission: Arc<Admission>,
    client: ClientKey,
}

/// A place in the queue.
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    position: watch::Receiver<u32>,
    admit: oneshot::Receiver<Permit>,
}

/// The outcome of [`Admission::enter`].
pub enum Entry {
    /// A slot was free.
    Admitted(Permit),
    /// The job waits; follow the ticket.
    Queued(Ticket),
}

impl State {
    fn client(&mut self, client: ClientKey) -> &mut ClientCounts {
        self.clients.entry(client).or_default()
    }

    fn forget_if_idle(&mut self, client: ClientKey) {
        if let Some(counts) = self.clients.get(&client)
            && counts.active == 0
            && counts.waiting == 0
        {
            self.clients.remove(&client);
        }
    }
}

impl Admission {
    /// A controller with `max_active` slots (at least one), room for
    /// `max_waiting` queued jobs, and the caps `per_client` for each
    /// client.
    pub fn new(max_active: usize, max_waiting: usize, per_client: PerClientCaps) -> Arc<Self> {
        Arc::new(Admission {
            max_active: max_active.max(1),
            max_waiting,
            per_client: PerClientCaps {
                active: per_client.active.max(1),
                waiting: per_client.waiting,
            },
            state: Mutex::new(State {
                active: 0,
                next_id: 0,
                waiting: VecDeque::new(),
                clients: HashMap::new(),
            }),
        })
    }

    /// A controller without per-client caps (each client may take every
    /// slot and queue place).
    pub fn unfair(max_active: usize, max_waiting: usize) -> Arc<Self> {
        Admission::new(
            max_active,
            max_waiting,
            PerClientCaps {
                active: usize::MAX,
                waiting: usize::MAX,
            },
        )
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked: every
        // critical section below completes its updates before returning.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admits, queues or refuses a job of `client`.
    ///
    /// Every change of the state hands free slots to the eligible waiters
    /// ([`Admission::admit_waiters`]), so a free slot never coexists with a
    /// waiter whose client is under its active cap: a job of a client under
    /// its cap that finds a slot free jumps no one.
    pub fn enter(self: &Arc<Self>, client: ClientKey) -> Result<Entry, Refused> {
        let mut state = self.lock();
        let counts = state.clients.get(&client).copied().unwrap_or_default();
        if state.active < self.max_active && counts.active < self.per_client.active {
            state.active += 1;
            state.client(client).active += 1;
            return Ok(Entry::Admitted(Permit {
                admission: Arc::clone(self),
                client,
            }));
        }
        if counts.waiting >= self.per_client.waiting {
            return Err(Refused::PerClient {
                client,
                active: counts.active,
                active_limit: self.per_client.active,
                waiting: counts.waiting,
                waiting_limit: self.per_client.waiting,
            });
        }
        if state.waiting.len() >= self.max_waiting {
            return Err(Refused::Busy {
                active: state.active,
                waiting: state.waiting.len(),
            });
        }
        state.client(client).waiting += 1;
        let id = state.next_id;
        state.next_id += 1;
        let position = u32::try_from(state.waiting.len() + 1).unwrap_or(u32::MAX);
        let (position_tx, position_rx) = watch::channel(position);
        let (admit_tx, admit_rx) = oneshot::channel();
        state.waiting.push_back(Waiter {
            id,
            client,
            position: position_tx,
            admit: admit_tx,
        });
        Ok(Entry::Queued(Ticket {
            admission: Arc::clone(self),
            id,
            position: position_rx,
            admit: admit_rx,
        }))
    }

    /// Jobs active and waiting now.
    pub fn occupancy(&self) -> Occupancy {
        let state = self.lock();
        Occupancy {
            active: state.active,
            waiting: state.waiting.len(),
        }
    }

    /// Hands free slots to waiters, front first, passing over waiters
    /// whose client holds its maximum of slots. Permits that could not be
    /// delivered (their ticket was dropped meanwhile) are returned so the
    /// caller drops them after releasing the lock.
    fn admit_waiters(self: &Arc<Self>, state: &mut State) -> Vec<Permit> {
        let mut undelivered = Vec::new();
        let mut index = 0;
        while state.active < self.max_active && index < state.waiting.len() {
            let client = state.waiting[index].client;
            let eligible = state
                .clients
                .get(&client)
                .is_none_or(|counts| counts.active < self.per_client.active);
            if !eligible {
                index += 1;
                continue;
            }
            let Some(waiter) = state.waiting.remove(index) else {
                break;
            };
            state.active += 1;
            let counts = state.client(client);
            counts.waiting -= 1;
            counts.active += 1;
            let permit = Permit {
                admission: Arc::clone(self),
                client,
            };
            if let Err(permit) = waiter.admit.send(permit) {
                undelivered.push(permit);
            }
        }
        renumber(state);
        undelivered
    }
}

fn renumber(state: &State) {
    for (index, waiter) in state.waiting.iter().enumerate() {
        let position = u32::try_from(index + 1).unwrap_or(u32::MAX);
        waiter.position.send_if_modified(|current| {
            let changed = *current != position;
            *current = position;
            changed
        });
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let undelivered = {
            let mut state = self.admission.lock();
            state.active -= 1;
            state.client(self.client).active -= 1;
            state.forget_if_idle(self.client);
            self.admission.admit_waiters(&mut state)
        };
        drop(undelivered);
    }
}

impl Ticket {
    /// The current position (1 = next).
    pub fn position(&self) -> u32 {
        *self.position.borrow()
    }

    /// Waits for the next event: a slot, or a new position. Cancel-safe:
    /// dropping the future keeps the place in the queue.
    pub async fn next_event(&mut self) -> TicketEvent {
        tokio::select! {
            biased;
            permit = &mut self.admit => match permit {
                Ok(permit) => TicketEvent::Admitted(permit),
                // The sender stays in the queue until it delivers a permit,
                // and the entry only leaves the queue by delivering or by
                // this ticket's drop, so this cannot happen while we hold
                // the ticket; wait for the position watch to end instead.
                Err(_) => std::future::pending().await,
            },
            changed = self.position.changed() => match changed {
                Ok(()) => TicketEvent::Moved(*self.position.borrow_and_update()),
                // The waiter left the queue to be admitted: the permit is
                // on its way.
                Err(_) => match (&mut self.admit).await {
                    Ok(permit) => TicketEvent::Admitted(permit),
                    Err(_) => std::future::pending().await,
                },
            },
        }
    }
}

/// What happened to a queued job.
pub enum TicketEvent {
    /// It got a slot.
    Admitted(Permit),
    /// Its position changed (1 = next).
    Moved(u32),
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.admission.lock();
        let Some(index) = state.waiting.iter().position(|waiter| waiter.id == self.id) else {
            return;
        };
        if let Some(waiter) = state.waiting.remove(index) {
            state.client(waiter.client).waiting -= 1;
            state.forget_if_idle(waiter.client);
        }
        renumber(&state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(n: u8) -> ClientKey {
        ClientKey::of([127, 0, 0, n].into(), 64)
    }

    fn admitted(entry: Result<Entry, Refused>) -> Permit {
        match entry {
            Ok(Entry::Admitted(permit)) => permit,
            _ => panic!("expected admission"),
        }
    }

    fn admitted_event(event: TicketEvent) -> Permit {
        match event {
            TicketEvent::Admitted(permit) => permit,
            TicketEvent::Moved(position) => panic!("expected admission, moved to {position}"),
        }
    }

    fn queued(entry: Result<Entry, Refused>) -> Ticket {
        match entry {
            Ok(Entry::Queued(ticket)) => ticket,
            _ => panic!("expected a queue place"),
        }
    }

    #[tokio::test]
    async fn fifo_with_positions_and_busy_past_the_bound() {
        let admission = Admission::unfair(1, 2);
        let first = admitted(admission.enter(client(1)));
        let mut second = queued(admission.enter(client(1)));
        let mut third = queued(admission.enter(client(1)));
        assert_eq!((second.position(), third.position()), (1, 2));
        assert!(matches!(
            admission.enter(client(1)),
            Err(Refused::Busy {
                active: 1,
                waiting: 2
            })
        ));
        drop(first);
        let permit = admitted_event(second.next_event().await);
        assert!(matches!(third.next_event().await, TicketEvent::Moved(1)));
        assert_eq!(
            admission.occupancy(),
            Occupancy {
                active: 1,
                waiting: 1
            }
        );
        drop(permit);
        let _permit = admitted_event(third.next_event().await);
        assert_eq!(
            admission.occupancy(),
            Occupancy {
                active: 1,
                waiting: 0
            }
        );
    }

    #[tokio::test]
    async fn leaving_the_queue_moves_the_others_up() {
        let admission = Admission::unfair(1, 3);
        let _first = admitted(admission.enter(client(1)));
        let second = queued(admission.enter(client(1)));
        let mut third = queued(admission.enter(client(1)));
        drop(second);
        assert!(matches!(third.next_event().await, TicketEvent::Moved(1)));
        assert_eq!(admission.occupancy().waiting, 1);
    }

    #[tokio::test]
    async fn a_permit_for_a_vanished_waiter_is_passed_on() {
        let admission = Admission::unfair(1, 3);
        let first = admitted(admission.enter(client(1)));
        let second = queued(admission.enter(client(1)));
        let mut third = queued(admission.enter(client(1)));
        // The slot goes to `second`, whose client leaves before taking it:
        // the undelivered permit is dropped with the ticket and moves on.
        drop(first);
        drop(second);
        let mut event = third.next_event().await;
        if let TicketEvent::Moved(position) = event {
            assert_eq!(position, 1);
            event = third.next_event().await;
        }
        let _permit = admitted_event(event);
        assert_eq!(
            admission.occupancy(),
            Occupancy {
                active: 1,
                waiting: 0
            }
        );
    }
}

#[cfg(test)]
mod fairness_tests {
    use super::*;

    fn client(n: u8) -> ClientKey {
        ClientKey::of([127, 0, 0, n].into(), 64)
    }

    fn caps(active: usize, waiting: usize) -> PerClientCaps {
        PerClientCaps { active, waiting }
    }

    #[tokio::test]
    async fn a_client_at_its_cap_waits_and_others_pass_it() {
        let admission = Admission::new(3, 10, caps(2, 1));
        let first = admission.enter(client(1)).expect("first");
        let _second = admission.enter(client(1)).expect("second");
        assert!(matches!(first, Entry::Admitted(_)));
        // A slot is free, but client 1 holds its two: its third job waits.
        let Ok(Entry::Queued(mut third)) = admission.enter(client(1)) else {
            panic!("client 1 is at its active cap: its job waits");
        };
        let refused = admission.enter(client(1)).err().expect("over both caps");
        assert_eq!(refused.reason(), "per_client_active");
        // Another client takes the free slot at once, passing it.
        assert!(matches!(admission.enter(client(2)), Ok(Entry::Admitted(_))));
        drop(first);
        assert!(matches!(third.next_event().await, TicketEvent::Admitted(_)));
    }

    #[test]
    fn queue_places_are_capped_per_client() {
        let admission = Admission::new(1, 10, caps(1, 2));
        let _running = admission.enter(client(9)).expect("running");
        let _q1 = admission.enter(client(1)).expect("q1");
        let _q2 = admission.enter(client(1)).expect("q2");
        let refused = admission
            .enter(client(1))
            .err()
            .expect("third waits no more");
        assert_eq!(refused.reason(), "per_client_queued");
        let other = admission.enter(client(2)).expect("another client queues");
        assert!(matches!(other, Entry::Queued(_)));
        assert_eq!(admission.occupancy().waiting, 3);
    }

    #[test]
    fn counts_are_forgotten_when_a_client_has_nothing_left() {
        let admission = Admission::new(1, 10, caps(1, 1));
        let running = admission.enter(client(1)).expect("running");
        let queued = admission.enter(client(2)).expect("queued");
        drop(queued);
        drop(running);
        assert!(admission.lock().clients.is_empty());
        assert_eq!(
            admission.occupancy(),
            Occupancy {
                active: 0,
                waiting: 0
            }
        );
    }
}
