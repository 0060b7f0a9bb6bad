//! aesd-client's integration tests (the aescrypt binary as a user runs it, TLS,
//! untrusted servers), one binary: each module was a file of its own. Run one
//! group with `cargo test -p aesd-client --test it MODULE::`.

mod aescrypt;
mod aescrypt_age;
mod aescrypt_age_armor;
mod aescrypt_age_passphrase;
mod aescrypt_by_name;
mod aescrypt_errors;
mod aescrypt_outputs;
mod aescrypt_passwords;
mod generate;
mod salt_check;
mod tls;
mod tls_pinned;
mod untrusted_server;
