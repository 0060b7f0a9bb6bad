//! Pinned server certificates: the usual way people trust a board's
//! self-signed certificate.
//!
//! A certificate given to `--tls-ca` that is exactly the certificate the
//! server presents is accepted as pinned, whatever its basic constraints
//! (OpenSSL 3's `openssl req -x509` marks a self-signed certificate
//! `CA:TRUE`, which WebPKI path building refuses as an end entity with
//! `CaUsedAsEndEntity`). `--tls-pin sha256:HEX` pins the SHA-256 of the
//! certificate's DER instead (what `aesd --tls-self-signed DIR` prints, and
//! `openssl x509 -outform der | sha256sum`). A pinned certificate must
//! still carry the server's name and be within its validity period; the
//! handshake's signature proves the server holds its key. Other
//! certificates go through WebPKI against the roots, as before.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, Error, SignatureScheme};
use sha2::{Digest, Sha256};

/// A `--tls-pin` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--tls-pin {pin:?}: expected sha256: and 64 hex digits (colons allowed), e.g. the pin `aesd --tls-self-signed DIR` prints"
)]
pub struct BadPin {
    /// The value given.
    pub pin: String,
}

/// The server's certificate is not the one pinned (and no root vouches
/// for it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the server's certificate does not match the pin (--tls-pin or the certificate in --tls-ca): \
     it presented {presented}. A different server, or its certificate was replaced: check the pin \
     `aesd --tls-self-signed` printed, or `openssl x509 -in CERT -outform der | sha256sum` on the server"
)]
pub struct PinMismatch {
    /// The pin of the certificate the server presented.
    pub presented: String,
}

/// Parses `sha256:HEX` (64 hex digits, any case, colons ignored).
pub fn parse_pin(pin: &str) -> Result<[u8; 32], BadPin> {
    let bad = || BadPin {
        pin: pin.to_owned(),
    };
    let hex = pin
        .strip_prefix("sha256:")
        .or_else(|| pin.strip_prefix("SHA256:"))
        .ok_or_else(bad)?;
    let digits: Vec<u8> = hex.bytes().filter(|byte| *byte != b':').collect();
    if digits.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (index, pair) in digits.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).map_err(|_| bad())?;
        out[index] = u8::from_str_radix(text, 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// The pin of a certificate: `sha256:` and the hex SHA-256 of its DER.
pub fn pin_of(cert: &[u8]) -> String {
    let digest = Sha256::digest(cert);
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

/// Accepts pinned certificates (checking name and validity), and sends
/// the others to WebPKI against the roots (when there are any).
#[derive(Debug)]
pub(crate) struct PinningVerifier {
    pinned_certs: Vec<CertificateDer<'static>>,
    pinned_digests: Vec<[u8; 32]>,
    webpki: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl PinningVerifier {
    pub(crate) fn new(
        pinned_certs: Vec<CertificateDer<'static>>,
        pinned_digests: Vec<[u8; 32]>,
        webpki: Option<Arc<WebPkiServerVerifier>>,
        provider: Arc<CryptoProvider>,
    ) -> Self {
        PinningVerifier {
            pinned_certs,
            pinned_digests,
            webpki,
            provider,
        }
    }

    fn is_pinned(&self, cert: &CertificateDer<'_>) -> bool {
        if self
            .pinned_certs
            .iter()
            .any(|pinned| pinned.as_ref() == cert.as_ref())
        {
            return true;
        }
        let digest: [u8; 32] = Sha256::digest(cert.as_ref()).into();
        self.pinned_digests.contains(&digest)
    }
}

impl ServerCertVerifier for PinningVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if self.is_pinned(end_entity) {
            let (not_before, not_after) = validity(end_entity.as_ref())
                .ok_or(Error::InvalidCertificate(CertificateError::BadEncoding))?;
            let now = now.as_secs();
            if now < not_before {
                return Err(Error::InvalidCertificate(CertificateError::NotValidYet));
            }
            if now > not_after {
                return Err(Error::InvalidCertificate(CertificateError::Expired));
            }
            let parsed = ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_name(&parsed, server_name)?;
            return Ok(ServerCertVerified::assertion());
        }
        match &self.webpki {
            Some(webpki) => webpki.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ),
            // Only pins were given, and this certificate matches none.
            None => Err(Error::InvalidCertificate(CertificateError::Other(
                rustls::OtherError(Arc::new(PinMismatch {
                    presented: pin_of(end_entity.as_ref()),
                })),
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A DER element: its tag, its contents and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |len, byte| (len << 8) | usize::from(*byte));
        (len, &rest[count..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The certificate's validity period (notBefore, notAfter) in seconds
/// since the Unix epoch.
fn validity(cert: &[u8]) -> Option<(u64, u64)> {
    const SEQUENCE: u8 = 0x30;
    let (tag, certificate, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, mut tbs, _) = element(certificate)?;
    if tag != SEQUENCE {
        return None;
    }
    // [0] version (optional), serialNumber, signature, issuer, validity.
    let (tag, _, rest) = element(tbs)?;
    if tag == 0xa0 {
        tbs = rest;
        let (_, _, rest) = element(tbs)?;
        tbs = rest;
    } else {
        tbs = rest;
    }
    let (_, _, rest) = element(tbs)?; // signature algorithm
    let (_, _, rest) = element(rest)?; // issuer
    let (tag, validity, _) = element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, not_before, rest) = element(validity)?;
    let not_before = time(tag, not_before)?;
    let (tag, not_after, _) = element(rest)?;
    Some((not_before, time(tag, not_after)?))
}

/// A UTCTime (`YYMMDDHHMMSSZ`, tag 0x17) or GeneralizedTime
/// (`YYYYMMDDHHMMSSZ`, tag 0x18) in seconds since the Unix epoch.
fn time(tag: u8, text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    if !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, rest) = match (tag, text.len()) {
        (0x17, 12) => {
            let yy = number(0..2)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, 2)
        }
        (0x18, 14) => (number(0..4)?, 4),
        _ => return None,
    };
    let field = |index: usize| number(rest + 2 * index..rest + 2 * index + 2);
    let (month, day) = (field(0)?, field(1)?);
    let (hour, minute, second) = (field(2)?, field(3)?, field(4)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    u64::try_from(seconds).ok()
}

/// Days from 1970-01-01 to the given proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_parse_with_or_without_colons_and_bad_ones_are_named() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        let pin = parse_pin(&format!("sha256:{hex}")).expect("plain");
        assert_eq!(pin[1], 0x11);
        assert_eq!(pin[31], 0xff);
        let colons: Vec<String> = hex
            .as_bytes()
            .chunks(2)
            .map(|pair| String::from_utf8_lossy(pair).into_owned())
            .collect();
        assert_eq!(parse_pin(&format!("sha256:{}", colons.join(":"))), Ok(pin));
        for bad in ["sha1:00", "sha256:00", "sha256:zz", hex] {
            assert!(parse_pin(bad).is_err(), "{bad}");
        }
        assert_eq!(
            pin_of(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn times_are_read_as_the_calendar_says() {
        assert_eq!(time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(time(0x17, b"261125141500Z"), Some(1_795_616_100));
        assert_eq!(time(0x18, b"20261125141500Z"), Some(1_795_616_100));
        assert_eq!(time(0x18, b"20000229235959Z"), Some(951_868_799));
        assert_eq!(time(0x17, b"2611251415Z"), None);
        assert_eq!(time(0x17, b"261325141500Z"), None);
        assert_eq!(element(&[0x30, 0x82, 0x01]), None);
    }
}
