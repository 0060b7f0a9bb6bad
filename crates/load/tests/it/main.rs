//! aesd-load's integration tests (the aesload binary, its outputs, shards,
//! interrupts), one binary: each module was a file of its own. Run one group
//! with `cargo test -p aesd-load --test it MODULE::`.

mod by_name;
mod cli;
mod interrupt;
mod load;
mod outputs;
mod shards;
mod untrusted_server;
