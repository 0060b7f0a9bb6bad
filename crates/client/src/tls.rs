//! TLS to a server started with `--tls-cert` (aescrypt's and aesload's
//! `--tls`, `--tls-ca FILE`, `--tls-server-name NAME`).
//!
//! rustls with ring, TLS 1.3 and 1.2. The server's certificate is checked
//! against the CA (or self-signed certificate) in `--tls-ca`, or against
//! the system's roots with `--tls` alone, and must name the server: the
//! host part of `--server`, or `--tls-server-name`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// The CA file could not be read or holds no PEM certificate.
    #[error("--tls-ca {}: {detail}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// No usable root certificate in the system's store.
    #[error(
        "--tls: no root certificates found in the system's store ({detail}); use --tls-ca FILE"
    )]
    NoSystemRoots {
        /// What the loader said.
        detail: String,
    },
    /// The server name is not a DNS name or IP address.
    #[error("TLS server name {name:?} is not a DNS name or an IP address")]
    BadServerName {
        /// The name given.
        name: String,
    },
}

/// How to connect with TLS.
#[derive(Clone)]
pub struct TlsSettings {
    connector: TlsConnector,
    server_name: Option<String>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsSettings {
    /// Trusts only the certificates in the PEM file `path` (a CA, or the
    /// server's own self-signed certificate).
    pub fn with_ca_file(path: &Path) -> Result<TlsSettings, TlsSetupError> {
        let ca_error = |detail: String| TlsSetupError::CaFile {
            path: path.to_owned(),
            detail,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|err| ca_error(err.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|err| ca_error(err.to_string()))?;
        if certs.is_empty() {
            return Err(ca_error(
                "no PEM certificate (BEGIN CERTIFICATE) in it".into(),
            ));
        }
        let mut roots = RootCertStore::empty();
        for cert in certs {
            roots
                .add(cert)
                .map_err(|err| ca_error(format!("not a usable CA certificate: {err}")))?;
        }
        Ok(Self::with_roots(roots))
    }

    /// Trusts the system's root certificates.
    pub fn with_system_roots() -> Result<TlsSettings, TlsSetupError> {
        let loaded = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(loaded.certs);
        if added == 0 {
            let detail = loaded
                .errors
                .first()
                .map(ToString::to_string)
                .unwrap_or_else(|| "the store is empty".into());
            return Err(TlsSetupError::NoSystemRoots { detail });
        }
        Ok(Self::with_roots(roots))
    }

    fn with_roots(roots: RootCertStore) -> TlsSettings {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map(|builder| builder.with_root_certificates(roots).with_no_client_auth());
        // The ring provider supports both versions: the builder cannot fail.
        let config = config.unwrap_or_else(|_| {
            ClientConfig::builder()
                .with_root_certificates(RootCertStore::empty())
                .with_no_client_auth()
        });
        TlsSettings {
            connector: TlsConnector::from(Arc::new(config)),
            server_name: None,
        }
    }

    /// Checks the server's certificate against `name` instead of the host
    /// part of the address.
    pub fn server_name(mut self, name: impl Into<String>) -> TlsSettings {
        self.server_name = Some(name.into());
        self
    }

    /// The connector and the name to check for a server at `addr`
    /// (`host:port`).
    pub(crate) fn for_addr(
        &self,
        addr: &str,
    ) -> Result<(TlsConnector, ServerName<'static>), TlsSetupError> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => host_of(addr).to_owned(),
        };
        let server_name = ServerName::try_from(name.clone())
            .map_err(|_| TlsSetupError::BadServerName { name })?;
        Ok((self.connector.clone(), server_name))
    }
}

/// The host part of `host:port` (`[v6]:port` without brackets).
fn host_of(addr: &str) -> &str {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => addr,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The TLS flags aescrypt and aesload share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// Connect with TLS, checking the server's certificate against the system's root
    /// certificates (for a server started with --tls-cert)
    #[arg(long, hide_short_help = true)]
    pub tls: bool,
    /// Connect with TLS, trusting only the certificates in this PEM file
    ///
    /// Connect with TLS, trusting only the certificates in this PEM file (the server's CA, or
    /// its self-signed certificate); implies --tls
    #[arg(long, value_name = "FILE", env = "AESD_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// The name the server's certificate must carry [default: the host part of --server]
    #[arg(long, value_name = "NAME", hide_short_help = true)]
    pub tls_server_name: Option<String>,
}

impl TlsArgs {
    /// The TLS settings the flags ask for: none without --tls or --tls-ca.
    pub fn settings(&self) -> Result<Option<TlsSettings>, TlsSetupError> {
        let settings = match (&self.tls_ca, self.tls) {
            (Some(ca), _) => TlsSettings::with_ca_file(ca)?,
            (None, true) => TlsSettings::with_system_roots()?,
            (None, false) => return Ok(None),
        };
        Ok(Some(match &self.tls_server_name {
            Some(name) => settings.server_name(name.clone()),
            None => settings,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_part_of_an_address_is_the_server_name() {
        assert_eq!(host_of("board.local:7878"), "board.local");
        assert_eq!(host_of("127.0.0.1:7878"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7878"), "::1");
        assert_eq!(host_of("board.local"), "board.local");
    }

    #[test]
    fn a_ca_file_without_certificates_is_a_typed_error() {
        let path = std::env::temp_dir().join(format!("aesd-ca-{}.pem", std::process::id()));
        std::fs::write(&path, "nothing here\n").expect("write");
        let err = TlsSettings::with_ca_file(&path).expect_err("no certificate");
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        let _ = std::fs::remove_file(&path);
        let missing =
            TlsSettings::with_ca_file(Path::new("/nonexistent/ca.pem")).expect_err("missing file");
        assert!(matches!(missing, TlsSetupError::CaFile { .. }), "{missing}");
    }
}
