//! TLS on the job port: `--tls-cert FILE` and `--tls-key FILE`.
//!
//! With both set, every connection must start a TLS handshake (after the
//! PROXY header, when it comes from a trusted proxy): aesd looks at the
//! first byte without taking it. A TLS record starts with 0x16 (a
//! handshake); an aesd hello starts with `A`. A plain hello on a TLS port
//! gets one plain `tls_required` error frame, so an old or misconfigured
//! client learns why, and the connection closes. The handshake must finish
//! within `handshake-timeout`; then the session runs over the encrypted
//! stream exactly as over TCP.
//!
//! Built on rustls with ring (TLS 1.3 and 1.2, no older): constant-time
//! AES-GCM and ChaCha20-Poly1305. Where the CPU has no AES instructions
//! (the RISC-V boards) the server prefers ChaCha20-Poly1305, which is
//! cheaper in software; elsewhere the clients' order counts.

use std::fmt;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The first byte of a TLS handshake record.
pub const TLS_HANDSHAKE_BYTE: u8 = 0x16;

/// Why the TLS certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        /// "certificate file" or "key file".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file holds no PEM certificate, or a broken one.
    #[error("{}: no PEM certificate (BEGIN CERTIFICATE) found{}", path.display(), detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    NoCertificate {
        /// The file.
        path: PathBuf,
        /// The parser's explanation, if it had one.
        detail: Option<String>,
    },
    /// The file holds no PEM private key (PKCS#8, PKCS#1 or SEC1).
    #[error("{}: no PEM private key found: {detail}", path.display())]
    NoKey {
        /// The file.
        path: PathBuf,
        /// The parser's explanation.
        detail: String,
    },
    /// rustls refused the pair (the key does not match the certificate, or
    /// an unsupported key type).
    #[error("certificate {} and key {} cannot be used together: {detail}", cert.display(), key.display())]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls' explanation.
        detail: String,
    },
}

/// The server's TLS identity: its certificate chain and key, ready to
/// accept handshakes.
#[derive(Clone)]
pub struct TlsIdentity {
    acceptor: TlsAcceptor,
}

impl TlsIdentity {
    /// Loads the certificate chain (PEM, leaf first) and the private key
    /// (PEM) and checks that they belong together.
    pub fn load(cert: &Path, key: &Path) -> Result<TlsIdentity, TlsError> {
        let chain = read_chain(cert)?;
        let private_key = read_key(key)?;
        let mut provider = provider::default_provider();
        if !cpu_has_aes() {
            // ChaCha20-Poly1305 first: cheaper than AES-GCM in software.
            provider
                .cipher_suites
                .sort_by_key(|suite| !is_chacha(suite.suite()));
        }
        let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .and_then(|builder| {
                builder
                    .with_no_client_auth()
                    .with_single_cert(chain, private_key)
            })
            .map_err(|err| TlsError::Pair {
                cert: cert.to_owned(),
                key: key.to_owned(),
                detail: err.to_string(),
            })?;
        config.ignore_client_order = !cpu_has_aes();
        // Session resumption by stateless tickets (encrypted with a key
        // rotated every 6 hours): a returning client skips the certificate
        // signature and key exchange (8.9 M instructions on the rv32 board),
        // and the server keeps nothing per session, so a flood of other
        // handshakes cannot push a client out of a cache.
        config.ticketer = provider::Ticketer::new().map_err(|err| TlsError::Pair {
            cert: cert.to_owned(),
            key: key.to_owned(),
            detail: format!("no session ticket key: {err}"),
        })?;
        Ok(TlsIdentity {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// What accepts a connection's handshake.
    pub fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity").finish_non_exhaustive()
    }
}

fn open(path: &Path, what: &'static str) -> Result<BufReader<std::fs::File>, TlsError> {
    std::fs::File::open(path)
        .map(BufReader::new)
        .map_err(|source| TlsError::Read {
            what,
            path: path.to_owned(),
            source,
        })
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let reader = open(path, "certificate file")?;
    let chain: Result<Vec<_>, _> = CertificateDer::pem_reader_iter(reader).collect();
    match chain {
        Ok(chain) if !chain.is_empty() => Ok(chain),
        Ok(_) => Err(TlsError::NoCertificate {
            path: path.to_owned(),
            detail: None,
        }),
        Err(err) => Err(TlsError::NoCertificate {
            path: path.to_owned(),
            detail: Some(err.to_string()),
        }),
    }
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let reader = open(path, "key file")?;
    PrivateKeyDer::from_pem_reader(reader).map_err(|err| TlsError::NoKey {
        path: path.to_owned(),
        detail: err.to_string(),
    })
}

fn is_chacha(suite: rustls::CipherSuite) -> bool {
    matches!(
        suite,
        rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
            | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
    )
}

/// Whether AES-GCM runs on AES instructions here (x86 AES-NI, ARMv8 AES).
fn cpu_has_aes() -> bool {
    aesd_core::engine::cpu_has_aes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_hold_no_certificate_or_key_are_typed_errors() {
        let dir = std::env::temp_dir().join(format!("aesd-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not PEM\n").expect("write");
        let missing = dir.join("missing.pem");
        let err = TlsIdentity::load(&missing, &empty).expect_err("missing");
        assert!(
            matches!(
                err,
                TlsError::Read {
                    what: "certificate file",
                    ..
                }
            ),
            "{err}"
        );
        let err = TlsIdentity::load(&empty, &empty).expect_err("no certificate");
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");
        assert!(err.to_string().contains("BEGIN CERTIFICATE"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// One in-memory TLS connection from `client` to `server`; the kind of
    /// handshake the server saw. The client reads a byte the server sends
    /// after the handshake, so it also takes the session tickets sent
    /// before it.
    async fn handshake(
        server: &TlsAcceptor,
        client: &Arc<rustls::ClientConfig>,
    ) -> rustls::HandshakeKind {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (near, far) = tokio::io::duplex(64 * 1024);
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(client));
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let (served, connected) = tokio::join!(
            async {
                let mut stream = server.accept(far).await.expect("server handshake");
                stream.write_all(b"x").await.expect("write");
                stream.flush().await.expect("flush");
                let kind = stream.get_ref().1.handshake_kind().expect("handshake done");
                (stream, kind)
            },
            async {
                let mut stream = connector
                    .connect(name, near)
                    .await
                    .expect("client handshake");
                let mut byte = [0u8; 1];
                stream.read_exact(&mut byte).await.expect("read");
                stream
            },
        );
        drop(connected);
        served.1
    }

    /// Session resumption is on and survives a flood of other handshakes:
    /// 300 other clients (more than any server-side session cache holds)
    /// between a client's two connections do not make its second one a
    /// full handshake again.
    #[tokio::test]
    async fn a_client_resumes_its_session_after_a_flood_of_others() {
        let dir = std::env::temp_dir().join(format!("aesd-tls-resume-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let made = crate::tls_init::make_for_loopback(&dir).expect("identity");
        let identity = TlsIdentity::load(&made.cert, &made.key).expect("load");
        let cert = CertificateDer::from_pem_file(&made.cert).expect("cert");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).expect("root");
        let config = || {
            Arc::new(
                rustls::ClientConfig::builder_with_provider(Arc::new(provider::default_provider()))
                    .with_safe_default_protocol_versions()
                    .expect("versions")
                    .with_root_certificates(roots.clone())
                    .with_no_client_auth(),
            )
        };
        let client = config();
        let server = identity.acceptor();
        assert_eq!(
            handshake(server, &client).await,
            rustls::HandshakeKind::Full
        );
        for _ in 0..300 {
            handshake(server, &config()).await;
        }
        assert_eq!(
            handshake(server, &client).await,
            rustls::HandshakeKind::Resumed,
            "the second connection resumes"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
