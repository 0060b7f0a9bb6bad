//! The keyring of a fleet in etcd (`--keyring etcd://HOST:PORT,.../PREFIX`):
//! every board reads and writes the same sealed keyring, each change a
//! transaction on the generation, and each board watches the prefix.
//! docs/fleet.md, "One keyring for the fleet", describes the layout, the
//! transactions and what works during an outage.
//!
//! * `location`: `--keyring` as a directory or an etcd target.
//! * `client`: a small blocking client of etcd's v3 JSON API over
//!   HTTP/1.1, plain or TLS with a client certificate, with failover.
//! * `store`: [`EtcdStore`], the `KeyringStore` over it.
//! * `watch`: the thread that loads a change another board stored.

pub mod client;
pub mod location;
pub mod store;
pub mod watch;

pub use client::{EtcdClient, EtcdTlsFiles};
pub use location::KeyringLocation;
pub use store::{EtcdStats, EtcdStore};
