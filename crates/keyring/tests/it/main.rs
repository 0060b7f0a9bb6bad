//! aesd-keyring's integration tests, one binary (one build and link; also
//! under qemu on riscv32imac): each module was a file of its own. Run one
//! group with `cargo test -p aesd-keyring --test it MODULE::`.

mod acl;
mod keyring;
mod sealed;
mod store;
