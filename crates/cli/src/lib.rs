//! The command-line pieces every aesd binary shares (`aesd`, `aescrypt`,
//! `aesload`), so each behaves the same way in each:
//!
//! * [`generate`]: `--generate man|complete-*`: the man page and shell
//!   completions from a binary's own clap definition.
//! * [`help`]: the help rule: `-h` a summary of at most 30 lines,
//!   `--help` every flag.
//! * [`pass_source`]: `--pass pass:|env:|file:|fd:|stdin` as openssl
//!   takes it, and the no-echo terminal prompt.
//! * [`password`]: password and access-token files, read as
//!   `openssl -pass file:` reads a password.
//! * [`key_args`]: `--key NAME` and `--token-file FILE` of by-name jobs
//!   (aescrypt, aesload): the access token, or with `--key` the keyring
//!   token.
//! * [`output`]: the output rule of every binary: `-` is stdout, files
//!   via [`atomic_output`], symlinks followed, devices and FIFOs written
//!   through (never replaced); checked before any work starts.
//! * [`atomic_output`]: a result file through a new 0600 temporary
//!   file, synced, then renamed into place.
//! * [`error_line`]: an error and its causes on one line, each once.
//! * [`secrets`]: no core dumps (a crash leaves no secret on disk).
//! * [`memory_lock`]: every page locked in memory where the limits allow
//!   (no secret swapped out).
//!
//! Of aesd's crates it depends on the protocol only (`aesd-proto`: the
//! password and token types, their limits and the secret-file reader).

pub mod atomic_output;
pub mod error_line;
pub mod generate;
pub mod help;
pub mod key_args;
pub mod memory_lock;
pub mod output;
pub mod pass_source;
pub mod password;
pub mod secrets;
