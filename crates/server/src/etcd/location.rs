//! Where the keyring is kept: `--keyring DIR` or
//! `--keyring etcd://HOST:PORT[,HOST:PORT...]/PREFIX`.

use std::fmt;
use std::path::PathBuf;

/// The scheme of an etcd keyring location.
pub const ETCD_SCHEME: &str = "etcd://";

/// At most this many endpoints in one location.
pub const MAX_ENDPOINTS: usize = 16;

/// One etcd client endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address as written (an IPv6 address in brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl Endpoint {
    /// The host without IPv6 brackets (for the TLS server name and
    /// `connect`).
    pub fn bare_host(&self) -> &str {
        self.host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&self.host)
    }
}

/// An etcd cluster's client endpoints and the key prefix of one fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdTarget {
    /// Tried in order; on a connection failure the next one.
    pub endpoints: Vec<Endpoint>,
    /// Key prefix, starting with `/`, without a trailing `/`
    /// (`etcd://h:2379/aesd/fleet1` → `/aesd/fleet1`).
    pub prefix: String,
}

impl fmt::Display for EtcdTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let endpoints: Vec<String> = self.endpoints.iter().map(ToString::to_string).collect();
        write!(f, "{ETCD_SCHEME}{}{}", endpoints.join(","), self.prefix)
    }
}

/// `--keyring`: a directory or an etcd prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyringLocation {
    /// Sealed generations as files in a directory.
    Dir(PathBuf),
    /// The sealed keyring in etcd, shared by a fleet.
    Etcd(EtcdTarget),
}

impl fmt::Display for KeyringLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyringLocation::Dir(dir) => write!(f, "{}", dir.display()),
            KeyringLocation::Etcd(target) => write!(f, "{target}"),
        }
    }
}

impl KeyringLocation {
    /// Reads `--keyring`: `etcd://...` is an etcd target, anything else a
    /// directory.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.strip_prefix(ETCD_SCHEME) {
            Some(rest) => parse_etcd(rest).map(KeyringLocation::Etcd),
            None if text.is_empty() => Err("empty keyring location".to_owned()),
            None => Ok(KeyringLocation::Dir(PathBuf::from(text))),
        }
    }
}

fn parse_etcd(rest: &str) -> Result<EtcdTarget, String> {
    const FORM: &str = "expected etcd://HOST:PORT[,HOST:PORT...]/PREFIX";
    let (hosts, prefix) = rest
        .split_once('/')
        .ok_or_else(|| format!("no key prefix: {FORM}"))?;
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
        return Err(format!("empty key prefix: {FORM}"));
    }
    if prefix
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err("the key prefix has a space or control character".to_owned());
    }
    let endpoints = hosts
        .split(',')
        .map(parse_endpoint)
        .collect::<Result<Vec<_>, _>>()?;
    if endpoints.len() > MAX_ENDPOINTS {
        return Err(format!(
            "{} endpoints: at most {MAX_ENDPOINTS}",
            endpoints.len()
        ));
    }
    Ok(EtcdTarget {
        endpoints,
        prefix: format!("/{prefix}"),
    })
}

fn parse_endpoint(text: &str) -> Result<Endpoint, String> {
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("endpoint {text:?} has no :PORT"))?;
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("endpoint {text:?}: {port:?} is not a port (1-65535)"))?;
    let bracketed = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
    let plain = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    if !(bracketed || plain) {
        return Err(format!(
            "endpoint {text:?}: {host:?} is not a host name or address"
        ));
    }
    Ok(Endpoint {
        host: host.to_owned(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_locations_parse_with_every_endpoint_and_the_prefix() {
        let location =
            KeyringLocation::parse("etcd://127.0.0.1:2379,[::1]:2479,etcd-2.lan:2579/aesd/fleet1/")
                .expect("parses");
        let KeyringLocation::Etcd(target) = &location else {
            panic!("not etcd: {location:?}");
        };
        assert_eq!(target.prefix, "/aesd/fleet1");
        let shown: Vec<String> = target.endpoints.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["127.0.0.1:2379", "[::1]:2479", "etcd-2.lan:2579"]);
        assert_eq!(target.endpoints[1].bare_host(), "::1");
        assert_eq!(
            location.to_string(),
            "etcd://127.0.0.1:2379,[::1]:2479,etcd-2.lan:2579/aesd/fleet1"
        );
        assert_eq!(
            KeyringLocation::parse("/var/lib/aesd/keyring"),
            Ok(KeyringLocation::Dir("/var/lib/aesd/keyring".into()))
        );
    }

    #[test]
    fn malformed_etcd_locations_say_what_is_wrong() {
        for (text, says) in [
            ("etcd://127.0.0.1:2379", "no key prefix"),
            ("etcd://127.0.0.1:2379/", "empty key prefix"),
            ("etcd://127.0.0.1/aesd", "no :PORT"),
            ("etcd://127.0.0.1:0/aesd", "not a port"),
            ("etcd://127.0.0.1:99999/aesd", "not a port"),
            ("etcd://:2379/aesd", "not a host"),
            ("etcd://a b:2379/aesd", "not a host"),
            ("etcd://h:1/a b", "space"),
            ("", "empty"),
        ] {
            let err = KeyringLocation::parse(text).expect_err(text);
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
