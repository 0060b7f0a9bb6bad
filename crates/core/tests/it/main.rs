//! aesd-core's integration tests, one binary: each module was a file of its
//! own. Run one group with `cargo test -p aesd-core --test it MODULE::`.

mod format_vectors;
mod protocol;
mod wycheproof_openssl_format;
