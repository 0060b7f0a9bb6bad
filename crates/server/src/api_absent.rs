//! In place of `api_start.rs` in an aesd built without the cargo feature
//! `http-api` (`--no-default-features`): no keyring and no HTTP API, so
//! the settings that ask for them are refused at start with the reason.
//! Such a build is the keyless service (every client holds its secret),
//! smaller by what the API and the keyring cost (docs/performance.md).

use crate::Server;
use crate::config::{Cli, Config};
use crate::tls::TlsIdentity;

/// Refuses `--dev` (`dev`) and the settings that need the keyring or its
/// API ([`Config::keyring_setting`]), before aesd binds anything (and in
/// `--check-config`).
pub fn available(dev: bool, config: &Config) -> Result<(), String> {
    let flag = if dev {
        Some("--dev")
    } else {
        config.keyring_setting()
    };
    match flag {
        Some(flag) => Err(format!(
            "{flag}: this aesd was built without the keyring and its HTTP API (cargo feature http-api); build it with the default features"
        )),
        None => Ok(()),
    }
}

/// No API, so no thread of its own ever runs.
#[derive(Debug)]
pub enum ApiThread {}

impl ApiThread {
    /// Never called: there is no such thread.
    pub fn stop(self) {
        match self {}
    }
}

/// Nothing to start: [`available`] refused every setting that would ask.
pub async fn start(
    _cli: &Cli,
    _config: &Config,
    _server: &Server,
    _tls: Option<TlsIdentity>,
) -> Result<Option<ApiThread>, String> {
    Ok(None)
}
