//! Admission control: a bounded number of active jobs behind a bounded
//! queue, shared fairly and without waste between clients.
//!
//! [`Admission::enter`] admits a job at once when a slot is free, queues
//! it otherwise, and refuses it ([`Refused`]) when the queue, or the
//! client's part of it, is full: a client never hangs on a full server.
//! Waiting jobs see their position change as the queue moves. Dropping a
//! [`Permit`] frees the slot; dropping a [`Ticket`] (a client that left the
//! queue) removes it and moves everyone behind it up.
//!
//! Fairness is work-conserving: a client alone may take every slot and
//! every queue place, and nothing is held back for clients that are not
//! there. When clients compete, each is entitled to a *share* of the slots:
//! `max_active / clients with jobs` (at least one), and never more than
//! `max_active_per_client`. Every change of the state rebalances:
//!
//! * a free slot goes to the waiting job whose client holds the fewest
//!   slots (the oldest among equals), so a newcomer does not queue behind
//!   another client's backlog;
//! * while a job waits whose client holds less than its share, and other
//!   clients hold more than theirs, the waiting job *borrows* a slot: it
//!   starts at once, beyond `max_active`. Running jobs are never stopped
//!   for it (their clients' work is not lost); the slots held over share
//!   are the ones lent, so at most `max_active` more jobs run (memory stays
//!   bounded by twice the slots' buffers), and as the jobs over share end
//!   the count returns under `max_active` by itself, since no client over
//!   its share starts another job while someone waits;
//! * a job that finds the queue full displaces the newest waiting job of the
//!   client with the most waiting jobs, when that client has at least two
//!   more than the newcomer's; the displaced job gets `busy`.
//!
//! So one address with slow jobs cannot hold the slots or the queue
//! against another address, and one address alone is never refused or
//! held back by caps meant for company.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{oneshot, watch};

use crate::client_id::ClientId;

/// Why a job was not queued, or lost its slot or queue place.
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
        client: ClientId,
        /// Its jobs holding a slot.
        active: usize,
        /// Its cap on those (`max-active-per-client`).
        active_limit: usize,
        /// Its jobs waiting.
        waiting: usize,
        /// Its cap on those (`max-queued-per-client`).
        waiting_limit: usize,
    },
    /// The job's queue place was given to another client's job: the queue
    /// was full and this client held the most places.
    #[error(
        "server busy: this job's queue place was given to another client ({client} held \
         {held} of {places} queue places); begin again later"
    )]
    Displaced {
        /// The client whose job lost its place.
        client: ClientId,
        /// Queue places it held, this one included.
        held: usize,
        /// All queue places.
        places: usize,
    },
}

impl Refused {
    /// The `reason` label of `aesd_jobs_refused_total`: `queue_full`,
    /// `per_client_active` (the client holds its maximum of slots and
    /// cannot queue more), `per_client_queued` (slots were taken by others
    /// and the client's queue places are used up), `displaced` (a waiting
    /// job's queue place went to another client).
    pub fn reason(&self) -> &'static str {
        match self {
            Refused::Busy { .. } => "queue_full",
            Refused::PerClient {
                active,
                active_limit,
                ..
            } if active >= active_limit => "per_client_active",
            Refused::PerClient { .. } => "per_client_queued",
            Refused::Displaced { .. } => "displaced",
        }
    }
}

/// Counts at one moment, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occupancy {
    /// Jobs holding a slot (borrowed slots included: see the module).
    pub active: usize,
    /// Jobs waiting in the queue.
    pub waiting: usize,
}

/// Caps that apply to each client separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerClientCaps {
    /// Slots one client keeps while another client waits (at least one);
    /// alone it may take every slot.
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
    /// Whether clients share (borrowed slots and displacement); off for
    /// [`Admission::unfair`].
    fair: bool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    next_id: u64,
    /// The ids of the jobs holding a slot, oldest first.
    running: Vec<u64>,
    waiting: VecDeque<Waiter>,
    clients: HashMap<ClientId, ClientCounts>,
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
    client: ClientId,
    position: watch::Sender<u32>,
    admit: oneshot::Sender<Result<Permit, Refused>>,
}

/// A job's right to run; the slot is freed when it is dropped.
#[derive(Debug)]
pub struct Permit {
    admission: Arc<Admission>,
    id: u64,
    client: ClientId,
}

/// A place in the queue.
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    position: watch::Receiver<u32>,
    admit: oneshot::Receiver<Result<Permit, Refused>>,
}

/// The outcome of [`Admission::enter`].
pub enum Entry {
    /// A slot was free.
    Admitted(Permit),
    /// The job waits; follow the ticket.
    Queued(Ticket),
}

impl State {
    fn client(&mut self, client: ClientId) -> &mut ClientCounts {
        self.clients.entry(client).or_default()
    }

    fn counts(&self, client: ClientId) -> ClientCounts {
        self.clients.get(&client).copied().unwrap_or_default()
    }

    fn forget_if_idle(&mut self, client: ClientId) {
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
    /// client; clients share fairly (see the module).
    pub fn new(max_active: usize, max_waiting: usize, per_client: PerClientCaps) -> Arc<Self> {
        Arc::new(Admission {
            max_active: max_active.max(1),
            max_waiting,
            per_client: PerClientCaps {
                active: per_client.active.max(1),
                waiting: per_client.waiting,
            },
            fair: true,
            state: Mutex::new(State {
                next_id: 0,
                running: Vec::new(),
                waiting: VecDeque::new(),
                clients: HashMap::new(),
            }),
        })
    }

    #[cfg(test)]
    /// A controller without per-client caps or sharing: first come, first
    /// served, each client may keep every slot and queue place.
    pub fn unfair(max_active: usize, max_waiting: usize) -> Arc<Self> {
        let mut admission = Admission::new(
            max_active,
            max_waiting,
            PerClientCaps {
                active: usize::MAX,
                waiting: usize::MAX,
            },
        );
        if let Some(inner) = Arc::get_mut(&mut admission) {
            inner.fair = false;
        }
        admission
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked: every
        // critical section below completes its updates before returning.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The slots a client is entitled to while others wait: an equal part
    /// of all slots among the clients with jobs (at least one), at most
    /// `max-active-per-client`.
    fn share(&self, state: &State) -> usize {
        let clients = state.clients.len().max(1);
        (self.max_active / clients)
            .max(1)
            .min(self.per_client.active)
    }

    /// Slots that may be lent beyond `max_active` now: those the clients
    /// over their share hold above it, at most `max_active` in all.
    fn lendable(&self, state: &State) -> usize {
        if !self.fair {
            return 0;
        }
        let share = self.share(state);
        let over: usize = state
            .clients
            .values()
            .map(|counts| counts.active.saturating_sub(share))
            .sum();
        over.min(self.max_active)
    }

    /// Admits, queues or refuses a job of `client`.
    ///
    /// Every change of the state rebalances ([`Admission::rebalance`]), so a
    /// free slot never coexists with a waiting job: a job that finds a slot
    /// free jumps no one.
    pub fn enter(self: &Arc<Self>, client: ClientId) -> Result<Entry, Refused> {
        let (entry, undelivered) = {
            let mut state = self.lock();
            if state.running.len() < self.max_active {
                let permit = self.start(&mut state, client);
                return Ok(Entry::Admitted(permit));
            }
            let counts = state.counts(client);
            if counts.waiting >= self.per_client.waiting {
                return Err(Refused::PerClient {
                    client,
                    active: counts.active,
                    active_limit: self.per_client.active,
                    waiting: counts.waiting,
                    waiting_limit: self.per_client.waiting,
                });
            }
            if state.waiting.len() >= self.max_waiting && !self.displace(&mut state, client) {
                return Err(Refused::Busy {
                    active: state.running.len(),
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
            let ticket = Ticket {
                admission: Arc::clone(self),
                id,
                position: position_rx,
                admit: admit_rx,
            };
            // The newcomer may borrow a slot held by a client over its share.
            let undelivered = self.rebalance(&mut state);
            (ticket, undelivered)
        };
        drop(undelivered);
        entry.settle_now()
    }

    /// Jobs active and waiting now.
    pub fn occupancy(&self) -> Occupancy {
        let state = self.lock();
        Occupancy {
            active: state.running.len(),
            waiting: state.waiting.len(),
        }
    }

    /// Gives `client` a slot (one must be free).
    fn start(self: &Arc<Self>, state: &mut State, client: ClientId) -> Permit {
        let id = state.next_id;
        state.next_id += 1;
        state.running.push(id);
        state.client(client).active += 1;
        Permit {
            admission: Arc::clone(self),
            id,
            client,
        }
    }

    /// The queue is full: takes the newest place of the client with the
    /// most places if it holds at least two more than `client`, and tells
    /// that job. Returns whether a place was freed.
    fn displace(&self, state: &mut State, client: ClientId) -> bool {
        if !self.fair {
            return false;
        }
        let mine = state.counts(client).waiting;
        let Some((&heaviest, counts)) = state
            .clients
            .iter()
            .filter(|(key, _)| **key != client)
            .max_by_key(|(_, counts)| counts.waiting)
        else {
            return false;
        };
        let held = counts.waiting;
        if held < mine + 2 {
            return false;
        }
        let Some(index) = state
            .waiting
            .iter()
            .rposition(|waiter| waiter.client == heaviest)
        else {
            return false;
        };
        let Some(waiter) = state.waiting.remove(index) else {
            return false;
        };
        state.client(heaviest).waiting -= 1;
        let _ = waiter.admit.send(Err(Refused::Displaced {
            client: heaviest,
            held,
            places: self.max_waiting,
        }));
        true
    }

    /// Hands free slots to waiting jobs, and lends slots to waiting jobs
    /// of clients under their share while others hold more, until neither
    /// applies. Permits that could not be delivered (their ticket was
    /// dropped meanwhile) are returned so the caller drops them after
    /// releasing the lock.
    fn rebalance(self: &Arc<Self>, state: &mut State) -> Vec<Permit> {
        let mut undelivered = Vec::new();
        while let Some(index) = self.next_to_start(state) {
            let Some(waiter) = state.waiting.remove(index) else {
                break;
            };
            state.client(waiter.client).waiting -= 1;
            let permit = self.start(state, waiter.client);
            if let Err(Ok(permit)) = waiter.admit.send(Ok(permit)) {
                undelivered.push(permit);
            }
        }
        renumber(state);
        undelivered
    }

    /// The waiting job to start now, if any: with a slot free, the one
    /// whose client holds the fewest slots, the oldest among equals (the
    /// head of the queue when unfair); with none free, that job if its
    /// client is under its share and a slot can be lent.
    fn next_to_start(&self, state: &State) -> Option<usize> {
        if state.waiting.is_empty() {
            return None;
        }
        if !self.fair {
            return (state.running.len() < self.max_active).then_some(0);
        }
        let mut best = 0;
        let mut fewest = usize::MAX;
        for (index, waiter) in state.waiting.iter().enumerate() {
            let active = state.counts(waiter.client).active;
            if active < fewest {
                (best, fewest) = (index, active);
            }
        }
        let running = state.running.len();
        let free = running < self.max_active;
        let lent = running < self.max_active + self.lendable(state) && fewest < self.share(state);
        (free || lent).then_some(best)
    }

    /// Frees the slot of job `id` if it still holds one.
    fn release(self: &Arc<Self>, id: u64, client: ClientId) {
        let undelivered = {
            let mut state = self.lock();
            if let Some(index) = state.running.iter().position(|running| *running == id) {
                state.running.remove(index);
                state.client(client).active -= 1;
                state.forget_if_idle(client);
            }
            self.rebalance(&mut state)
        };
        drop(undelivered);
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
        self.admission.release(self.id, self.client);
    }
}

impl Ticket {
    /// What a ticket just issued by [`Admission::enter`] means: a slot
    /// lent at once is an admission (the client hears `started`, not
    /// `queued`); otherwise the job waits.
    fn settle_now(mut self) -> Result<Entry, Refused> {
        match self.admit.try_recv() {
            Ok(Ok(permit)) => Ok(Entry::Admitted(permit)),
            Ok(Err(refused)) => Err(refused),
            Err(_) => Ok(Entry::Queued(self)),
        }
    }

    /// The current position (1 = next).
    pub fn position(&self) -> u32 {
        *self.position.borrow()
    }

    /// Waits for the next event: a slot, a new position, or the loss of
    /// the place to another client. Cancel-safe: dropping the future keeps
    /// the place in the queue.
    pub async fn next_event(&mut self) -> TicketEvent {
        tokio::select! {
            biased;
            outcome = &mut self.admit => Self::outcome(outcome).await,
            changed = self.position.changed() => match changed {
                Ok(()) => TicketEvent::Moved(*self.position.borrow_and_update()),
                // The waiter left the queue: admitted or displaced, the
                // outcome is on its way.
                Err(_) => Self::outcome((&mut self.admit).await).await,
            },
        }
    }

    async fn outcome(
        outcome: Result<Result<Permit, Refused>, oneshot::error::RecvError>,
    ) -> TicketEvent {
        match outcome {
            Ok(Ok(permit)) => TicketEvent::Admitted(permit),
            Ok(Err(refused)) => TicketEvent::Refused(refused),
            // The sender stays in the queue until it delivers an outcome,
            // and the entry only leaves the queue by delivering or by this
            // ticket's drop, so this cannot happen while we hold the ticket.
            Err(_) => std::future::pending().await,
        }
    }
}

/// What happened to a queued job.
pub enum TicketEvent {
    /// It got a slot.
    Admitted(Permit),
    /// Its position changed (1 = next).
    Moved(u32),
    /// Its place went to another client's job.
    Refused(Refused),
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

    fn client(n: u8) -> ClientId {
        ClientId::of([127, 0, 0, n].into(), 64)
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
            TicketEvent::Refused(refused) => panic!("expected admission, got {refused}"),
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

    fn client(n: u8) -> ClientId {
        ClientId::of([127, 0, 0, n].into(), 64)
    }

    fn caps(active: usize, waiting: usize) -> PerClientCaps {
        PerClientCaps { active, waiting }
    }

    fn admitted(entry: Result<Entry, Refused>) -> Permit {
        match entry {
            Ok(Entry::Admitted(permit)) => permit,
            _ => panic!("expected admission"),
        }
    }

    fn queued(entry: Result<Entry, Refused>) -> Ticket {
        match entry {
            Ok(Entry::Queued(ticket)) => ticket,
            _ => panic!("expected a queue place"),
        }
    }

    /// The outcome a ticket already has (admitted or refused), skipping
    /// position changes; `None` while it still waits.
    fn settled(ticket: &mut Ticket) -> Option<Result<Permit, Refused>> {
        loop {
            match now(ticket.next_event())? {
                TicketEvent::Admitted(permit) => return Some(Ok(permit)),
                TicketEvent::Refused(refused) => return Some(Err(refused)),
                TicketEvent::Moved(_) => continue,
            }
        }
    }

    /// Polls `future` once: `None` if it is not ready. The admission state
    /// changes synchronously, so every outcome is delivered by then.
    fn now<F: std::future::Future>(future: F) -> Option<F::Output> {
        let mut future = std::pin::pin!(future);
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        match future.as_mut().poll(&mut context) {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        }
    }

    /// Whether `ticket` is still waiting (no outcome yet).
    fn waits(ticket: &mut Ticket) -> bool {
        settled(ticket).is_none()
    }

    #[test]
    fn a_client_alone_takes_every_slot_and_every_queue_place() {
        // One worker's two slots, one slot per client when others wait:
        // alone, both of its jobs run (the lane engine is shared).
        let admission = Admission::new(2, 3, caps(1, 3));
        let _first = admitted(admission.enter(client(1)));
        let _second = admitted(admission.enter(client(1)));
        let _waiting: Vec<Ticket> = (0..3).map(|_| queued(admission.enter(client(1)))).collect();
        assert_eq!(
            admission.enter(client(1)).err().map(|r| r.reason()),
            Some("per_client_active")
        );
        assert_eq!(
            admission.occupancy(),
            Occupancy {
                active: 2,
                waiting: 3
            }
        );
    }

    #[test]
    fn a_newcomer_borrows_a_slot_held_over_share_and_no_job_is_stopped() {
        let admission = Admission::new(4, 8, caps(3, 8));
        let mut permits: Vec<Permit> = (0..4)
            .map(|_| admitted(admission.enter(client(1))))
            .collect();
        // The newcomer starts at once: no `queued` first.
        let _permit = admitted(admission.enter(client(2)));
        // Client 1's four jobs keep their slots: five run.
        assert_eq!(admission.occupancy().active, 5);
        // Client 1 is over its share (2 with company): its next job waits,
        // even when one of its jobs ends (4 running is the cap) ...
        let mut again = queued(admission.enter(client(1)));
        drop(permits.pop());
        assert!(waits(&mut again));
        assert_eq!(admission.occupancy().active, 4);
        // ... and starts when the count is back under the cap.
        drop(permits.pop());
        let _again = settled(&mut again).expect("started").expect("admitted");
        assert_eq!(admission.occupancy().active, 4);
    }

    #[test]
    fn slots_are_lent_only_as_many_as_are_held_over_share() {
        // Client 1 holds both slots; nine others come. With ten clients
        // the share is one slot: client 1 holds one over it, so one slot is
        // lent and the other newcomers wait.
        let admission = Admission::new(2, 100, caps(2, 100));
        let _held: Vec<Permit> = (0..2)
            .map(|_| admitted(admission.enter(client(1))))
            .collect();
        let _lent = admitted(admission.enter(client(2)));
        let mut newcomers: Vec<Ticket> = (3..=10)
            .map(|n| queued(admission.enter(client(n))))
            .collect();
        assert!(newcomers.iter_mut().all(waits));
        assert_eq!(
            admission.occupancy(),
            Occupancy {
                active: 3,
                waiting: 8
            }
        );
    }

    /// The attack of issue 24: one address holds three slots, a second the
    /// fourth, both fill the queue; a third address is owed a slot.
    #[test]
    fn two_addresses_holding_every_slot_and_place_cannot_lock_out_a_third() {
        let admission = Admission::new(4, 64, caps(3, 64));
        let _a: Vec<Permit> = (0..3)
            .map(|_| admitted(admission.enter(client(1))))
            .collect();
        let _b = admitted(admission.enter(client(2)));
        // 127.0.0.2's first waiting job borrows a slot over 127.0.0.1's
        // share (two clients: two slots each); the rest wait.
        let _b2 = admitted(admission.enter(client(2)));
        let mut tickets: Vec<Ticket> = (0..64)
            .map(|n| queued(admission.enter(client(2 - (n % 2) as u8))))
            .collect();
        assert_eq!(
            admission.occupancy(),
            Occupancy {
                active: 5,
                waiting: 64
            }
        );
        let _permit = admitted(admission.enter(client(3)));
        let displaced: Vec<Refused> = tickets
            .iter_mut()
            .filter_map(settled)
            .filter_map(Result::err)
            .collect();
        assert_eq!(displaced.len(), 1, "one queue place was given up");
        assert_eq!(displaced[0].reason(), "displaced");
        // Nobody's running job was stopped: six run.
        assert_eq!(
            admission.occupancy(),
            Occupancy {
                active: 6,
                waiting: 63
            }
        );
    }

    #[test]
    fn a_full_queue_is_not_taken_from_a_client_with_about_as_many_places() {
        let admission = Admission::new(1, 3, caps(1, 3));
        let _running = admitted(admission.enter(client(9)));
        let _a = queued(admission.enter(client(1)));
        let _b = queued(admission.enter(client(2)));
        let _c = queued(admission.enter(client(2)));
        // Client 2 holds 2 places, client 1 one: no displacement.
        let refused = admission.enter(client(1)).err().expect("queue full");
        assert_eq!(refused.reason(), "queue_full");
        // Client 3 with none takes one of client 2's.
        let _d = queued(admission.enter(client(3)));
    }

    #[test]
    fn unfair_admission_never_lends_a_slot() {
        let admission = Admission::unfair(2, 2);
        let _first = admitted(admission.enter(client(1)));
        let _second = admitted(admission.enter(client(1)));
        let mut other = queued(admission.enter(client(2)));
        assert!(waits(&mut other));
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
