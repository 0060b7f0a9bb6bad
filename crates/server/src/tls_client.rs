//! TLS client settings for aesd's own outgoing connections (etcd's
//! client port, `--etcd-cacert`; an `https://` transit seal server or
//! aesd's API, `--seal-transit-ca-cert`, `BAO_CACERT`): rustls with ring,
//! TLS 1.2 and 1.3, the server's certificate checked against the PEM
//! certificates of a CA file (webpki: the server's name must be in it).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A file and the flag (or variable) that named it, for messages.
pub type Named<'a> = (&'a Path, &'a str);

/// The certificates of the PEM file `path`, at least one.
fn read_certs((path, flag): Named<'_>) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|err| format!("{flag} {}: {err}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{flag} {}: no PEM certificate (BEGIN CERTIFICATE) in it",
            path.display()
        ));
    }
    Ok(certs)
}

/// A client configuration trusting the certificates in `ca`; with
/// `client` (its certificate chain and key), presenting that certificate
/// (etcd's `--client-cert-auth`).
pub fn client_config(
    ca: Named<'_>,
    client: Option<(Named<'_>, Named<'_>)>,
) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs(ca)? {
        roots
            .add(cert)
            .map_err(|err| format!("{} {}: {err}", ca.1, ca.0.display()))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|err| format!("TLS: {err}"))?
    .with_root_certificates(roots);
    match client {
        Some((cert, (key, key_flag))) => {
            let chain = read_certs(cert)?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|err| format!("{key_flag} {}: {err}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|err| format!("{}/{key_flag}: {err}", cert.1))
        }
        None => Ok(builder.with_no_client_auth()),
    }
}
