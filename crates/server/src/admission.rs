//! Admission control: a bounded number of active jobs behind a bounded
//! FIFO queue.
//!
//! [`Admission::enter`] admits a job at once when a slot is free and nobody
//! waits, queues it otherwise, and refuses it ([`Refused::Busy`]) when the
//! queue is full: a client never hangs on a full server. Waiting jobs see
//! their position change as the queue moves. Dropping a [`Permit`] frees
//! the slot and admits the next waiter; dropping a [`Ticket`] (a client
//! that left the queue) removes it and moves everyone behind it up.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{oneshot, watch};

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
}

/// Counts at one moment, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occupancy {
    /// Jobs holding a slot.
    pub active: usize,
    /// Jobs waiting in the queue.
    pub waiting: usize,
}

/// The admission controller shared by all connections.
#[derive(Debug)]
pub struct Admission {
    max_active: usize,
    max_waiting: usize,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    active: usize,
    next_id: u64,
    waiting: VecDeque<Waiter>,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    position: watch::Sender<u32>,
    admit: oneshot::Sender<Permit>,
}

/// A job's right to run; the slot is freed when it is dropped.
#[derive(Debug)]
pub struct Permit {
    admission: Arc<Admission>,
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

impl Admission {
    /// A controller with `max_active` slots (at least one) and room for
    /// `max_waiting` queued jobs.
    pub fn new(max_active: usize, max_waiting: usize) -> Arc<Self> {
        Arc::new(Admission {
            max_active: max_active.max(1),
            max_waiting,
            state: Mutex::new(State {
                active: 0,
                next_id: 0,
                waiting: VecDeque::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked: every
        // critical section below completes its updates before returning.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admits, queues or refuses a job.
    pub fn enter(self: &Arc<Self>) -> Result<Entry, Refused> {
        let mut state = self.lock();
        if state.active < self.max_active && state.waiting.is_empty() {
            state.active += 1;
            return Ok(Entry::Admitted(Permit {
                admission: Arc::clone(self),
            }));
        }
        if state.waiting.len() >= self.max_waiting {
            return Err(Refused::Busy {
                active: state.active,
                waiting: state.waiting.len(),
            });
        }
        let id = state.next_id;
        state.next_id += 1;
        let position = u32::try_from(state.waiting.len() + 1).unwrap_or(u32::MAX);
        let (position_tx, position_rx) = watch::channel(position);
        let (admit_tx, admit_rx) = oneshot::channel();
        state.waiting.push_back(Waiter {
            id,
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

    /// Hands free slots to waiters, front first. Permits that could not be
    /// delivered (their ticket was dropped meanwhile) are returned so the
    /// caller drops them after releasing the lock.
    fn admit_waiters(self: &Arc<Self>, state: &mut State) -> Vec<Permit> {
        let mut undelivered = Vec::new();
        while state.active < self.max_active {
            let Some(waiter) = state.waiting.pop_front() else {
                break;
            };
            state.active += 1;
            let permit = Permit {
                admission: Arc::clone(self),
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
        let before = state.waiting.len();
        state.waiting.retain(|waiter| waiter.id != self.id);
        if state.waiting.len() != before {
            renumber(&state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let admission = Admission::new(1, 2);
        let first = admitted(admission.enter());
        let mut second = queued(admission.enter());
        let mut third = queued(admission.enter());
        assert_eq!((second.position(), third.position()), (1, 2));
        assert!(matches!(
            admission.enter(),
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
        let admission = Admission::new(1, 3);
        let _first = admitted(admission.enter());
        let second = queued(admission.enter());
        let mut third = queued(admission.enter());
        drop(second);
        assert!(matches!(third.next_event().await, TicketEvent::Moved(1)));
        assert_eq!(admission.occupancy().waiting, 1);
    }

    #[tokio::test]
    async fn a_permit_for_a_vanished_waiter_is_passed_on() {
        let admission = Admission::new(1, 3);
        let first = admitted(admission.enter());
        let second = queued(admission.enter());
        let mut third = queued(admission.enter());
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
