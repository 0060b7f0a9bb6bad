//! Shards: one run's clients split over several aesload processes
//! (`--shard I/N`), each on its own machine or source address.
//!
//! Client `j` of a plan belongs to shard `j mod N`. Everything else about
//! client `j` (its size, its data seed, its server, its batch, its arrival
//! time) comes from the global index `j`, so the union of the N shards is
//! exactly the unsharded run's jobs, and no job runs twice.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Part `index` of `count` of a run (`0 ≤ index < count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard's number, from 0 (as Kubernetes numbers an Indexed Job's
    /// pods).
    pub index: usize,
    /// How many shards the run has.
    pub count: usize,
}

/// A `--shard` value is not `I/N` with `0 ≤ I < N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Not two numbers separated by `/`.
    #[error("invalid shard {text:?}: expected I/N, e.g. 0/3 (shards are numbered from 0)")]
    Syntax {
        /// The text given.
        text: String,
    },
    /// `N` is 0.
    #[error("invalid shard {text:?}: the number of shards must be at least 1")]
    NoShards {
        /// The text given.
        text: String,
    },
    /// `I ≥ N`.
    #[error(
        "invalid shard {index}/{count}: shards are numbered 0 to {last}",
        last = count - 1
    )]
    IndexTooLarge {
        /// The index given.
        index: usize,
        /// The number of shards.
        count: usize,
    },
}

impl Shard {
    /// The whole run: one shard.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count`, checked.
    pub fn new(index: usize, count: usize) -> Result<Shard, ShardError> {
        let text = || format!("{index}/{count}");
        if count == 0 {
            return Err(ShardError::NoShards { text: text() });
        }
        if index >= count {
            return Err(ShardError::IndexTooLarge { index, count });
        }
        Ok(Shard { index, count })
    }

    /// Whether client `client` (the plan's global index) is this shard's.
    pub fn owns(&self, client: usize) -> bool {
        client % self.count.max(1) == self.index
    }

    /// This shard's clients among `clients`, in order.
    pub fn clients(&self, clients: usize) -> impl Iterator<Item = usize> + '_ {
        (0..clients).filter(|client| self.owns(*client))
    }

    /// Whether this is the whole run (`0/1`).
    pub fn is_whole(&self) -> bool {
        self.count == 1
    }
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(text: &str) -> Result<Shard, ShardError> {
        let syntax = || ShardError::Syntax {
            text: text.to_owned(),
        };
        let (index, count) = text.trim().split_once('/').ok_or_else(syntax)?;
        let index = index.trim().parse().map_err(|_| syntax())?;
        let count: usize = count.trim().parse().map_err(|_| syntax())?;
        if count == 0 {
            return Err(ShardError::NoShards {
                text: text.to_owned(),
            });
        }
        Shard::new(index, count)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_bad_ones_say_why() {
        assert_eq!("2/3".parse(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!(" 0 / 1 ".parse(), Ok(Shard::WHOLE));
        assert_eq!(
            "3/3".parse::<Shard>(),
            Err(ShardError::IndexTooLarge { index: 3, count: 3 })
        );
        assert!(matches!(
            "0/0".parse::<Shard>(),
            Err(ShardError::NoShards { .. })
        ));
        for bad in ["", "1", "1/", "/3", "-1/3", "a/b", "1/3/4"] {
            assert!(
                matches!(bad.parse::<Shard>(), Err(ShardError::Syntax { .. })),
                "{bad:?}"
            );
        }
        let message = "5/3".parse::<Shard>().expect_err("refused").to_string();
        assert!(message.contains("numbered 0 to 2"), "{message}");
    }

    #[test]
    fn the_shards_cover_every_client_exactly_once() {
        for clients in [0, 1, 2, 10, 97, 100] {
            for count in 1..=7 {
                let mut seen = vec![0u32; clients];
                for index in 0..count {
                    let shard = Shard::new(index, count).expect("valid");
                    for client in shard.clients(clients) {
                        seen[client] += 1;
                    }
                }
                assert!(
                    seen.iter().all(|times| *times == 1),
                    "{clients} clients over {count} shards: {seen:?}"
                );
            }
        }
    }

    #[test]
    fn shards_are_balanced_to_within_one_client() {
        for index in 0..3 {
            let shard = Shard::new(index, 3).expect("valid");
            let own = shard.clients(100).count();
            assert!((33..=34).contains(&own), "{shard}: {own}");
        }
    }
}
