//! TLS to a server started with `--tls-cert` (aescrypt's and aesload's
//! `--tls`, `--tls-ca FILE`, `--tls-server-name NAME`).
//!
//! rustls with ring, TLS 1.3 and 1.2. The server's certificate is checked
//! against the CA (or self-signed certificate) in `--tls-ca`, or against
//! the system's roots with `--tls` alone, and must name the server: the
//! host part of `--server`, or `--tls-server-name`. A certificate in the
//! `--tls-ca` file that is exactly the server's, or one whose SHA-256 is
//! given with `--tls-pin`, is accepted as pinned (see [`crate::cert_pin`]),
//! even when it is marked as a CA, as OpenSSL 3 marks self-signed ones.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::cert_pin::{PinningVerifier, parse_pin};

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
    /// A `--tls-pin` that does not parse.
    #[error(transparent)]
    BadPin(#[from] crate::cert_pin::BadPin),
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
    /// Trusts only the certificates in the PEM file `path`: as CAs, and
    /// each one as a pinned certificate (the server's own self-signed
    /// certificate, even when marked CA:TRUE).
    pub fn with_ca_file(path: &Path) -> Result<TlsSettings, TlsSetupError> {
        Self::with_ca_file_and_pins(path, &[])
    }

    /// [`TlsSettings::with_ca_file`], also accepting a certificate whose
    /// SHA-256 is one of `pins` (see [`crate::cert_pin::parse_pin`]).
    pub fn with_ca_file_and_pins(
        path: &Path,
        pins: &[[u8; 32]],
    ) -> Result<TlsSettings, TlsSetupError> {
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
        for cert in &certs {
            // A leaf that is not a usable trust anchor may still be pinned.
            let _ = roots.add(cert.clone());
        }
        Ok(Self::with_verifier(roots, certs, pins.to_vec()))
    }

    /// Trusts only the certificates whose SHA-256 is one of `pins`.
    pub fn with_pins(pins: &[[u8; 32]]) -> TlsSettings {
        Self::with_verifier(RootCertStore::empty(), Vec::new(), pins.to_vec())
    }

    /// Trusts the system's root certificates.
    pub fn with_system_roots() -> Result<TlsSettings, TlsSetupError> {
        Self::with_system_roots_and_pins(&[])
    }

    /// [`TlsSettings::with_system_roots`], also accepting a certificate
    /// whose SHA-256 is one of `pins`.
    pub fn with_system_roots_and_pins(pins: &[[u8; 32]]) -> Result<TlsSettings, TlsSetupError> {
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
        Ok(Self::with_verifier(roots, Vec::new(), pins.to_vec()))
    }

    fn with_verifier(
        roots: RootCertStore,
        pinned: Vec<CertificateDer<'static>>,
        pins: Vec<[u8; 32]>,
    ) -> TlsSettings {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = (!roots.is_empty())
            .then(|| {
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .build()
                    .ok()
            })
            .flatten();
        let verifier = Arc::new(PinningVerifier::new(
            pinned,
            pins,
            webpki,
            Arc::clone(&provider),
        ));
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map(|builder| {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(verifier)
                    .with_no_client_auth()
            });
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
    #[arg(
        long_help = "Connect with TLS, trusting only the certificates in this PEM file (the server's CA, or \
                       its self-signed certificate); implies --tls"
    )]
    #[arg(long, value_name = "FILE", env = "AESD_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// The name the server's certificate must carry [default: the host part of --server]
    #[arg(long, value_name = "NAME", hide_short_help = true)]
    pub tls_server_name: Option<String>,
    /// Connect with TLS, accepting the server's certificate when its SHA-256 is this pin
    /// (sha256:HEX, as `aesd --tls-self-signed DIR` prints it); name and validity are still
    /// checked; implies --tls (with --tls-ca or --tls, either is accepted)
    #[arg(
        long,
        value_name = "sha256:HEX",
        env = "AESD_TLS_PIN",
        hide_short_help = true
    )]
    pub tls_pin: Option<String>,
}

impl TlsArgs {
    /// The TLS settings the flags ask for: none without --tls or --tls-ca.
    pub fn settings(&self) -> Result<Option<TlsSettings>, TlsSetupError> {
        let pins = match &self.tls_pin {
            Some(pin) => vec![parse_pin(pin)?],
            None => Vec::new(),
        };
        let settings = match (&self.tls_ca, self.tls, pins.is_empty()) {
            (Some(ca), _, _) => TlsSettings::with_ca_file_and_pins(ca, &pins)?,
            (None, true, _) => TlsSettings::with_system_roots_and_pins(&pins)?,
            (None, false, false) => TlsSettings::with_pins(&pins),
            (None, false, true) => return Ok(None),
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
