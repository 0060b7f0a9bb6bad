//! aesd-server's integration tests, one binary: each module was a file (and a
//! test binary) of its own. One binary builds and links once instead of once
//! per file (the test command's largest cost was building test binaries).
//! Run one group with `cargo test -p aesd-server --test it MODULE::`.

mod bao_support;
mod by_name_support;
mod common;
mod etcd_support;

mod admission;
mod age_jobs;
mod audit_chain;
mod audit_log;
mod auth;
mod auto_unseal;
mod bad_input;
mod bao_cli;
mod by_name;
mod by_name_vector;
mod data_keys;
mod etcd_fleet;
mod fairness;
mod fd_limit;
mod generate;
mod haproxy_config;
mod hardening;
mod http_tls;
mod lanes;
mod limits;
mod log_flood;
mod memory_lock;
mod metrics_endpoint;
mod openssl_oracle;
mod prometheus;
mod proxy;
mod readiness;
mod shutdown;
mod streaming_memory;
mod timeouts;
mod tls_gate;
mod tls_init;
mod transit_api;
mod warnings;
