//! `http://HOST[:PORT]`: where an OpenBao-shaped HTTP API listens (the
//! transit seal's server, `--seal-transit-address`; a running aesd,
//! `BAO_ADDR`).

use std::fmt;

/// The port when the address names none (OpenBao's).
pub const DEFAULT_PORT: u16 = 8200;

/// Where the HTTP API listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAddress {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl HttpAddress {
    /// Parses `http://HOST[:PORT][/]`. `https://` is refused: this client
    /// speaks plain HTTP only.
    pub fn parse(text: &str) -> Result<Self, String> {
        let rest = match text.strip_prefix("http://") {
            Some(rest) => rest,
            None if text.starts_with("https://") => {
                return Err(format!(
                    "{text}: https:// is not supported (this client speaks plain HTTP only); use http:// on a network you trust, ideally loopback"
                ));
            }
            None => return Err(format!("{text}: must start with http://")),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
            return Err(format!(
                "{text}: expected http://HOST[:PORT] with no path, user or query"
            ));
        }
        let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
            let (host, after) = inner
                .split_once(']')
                .ok_or_else(|| format!("{text}: unclosed [ in the IPv6 address"))?;
            match after {
                "" => (host, None),
                _ => (
                    host,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or_else(|| format!("{text}: expected :PORT after ]"))?,
                    ),
                ),
            }
        } else {
            match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() || !host.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("{text}: no host"));
        }
        let port = match port {
            None => DEFAULT_PORT,
            Some(port) => port
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| format!("{text}: the port must be 1 to 65535"))?,
        };
        Ok(HttpAddress {
            host: host.to_owned(),
            port,
        })
    }

    /// Whether the host is a loopback address (the root key crosses no
    /// network then).
    pub fn is_loopback(&self) -> bool {
        self.host == "localhost"
            || self
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The `Host` header's value.
    pub fn host_header(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for HttpAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}", self.host_header())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_and_print_back() {
        for (text, host, port, shown) in [
            (
                "http://127.0.0.1:8300",
                "127.0.0.1",
                8300,
                "http://127.0.0.1:8300",
            ),
            (
                "http://127.0.0.1:8300/",
                "127.0.0.1",
                8300,
                "http://127.0.0.1:8300",
            ),
            (
                "http://vault.lan",
                "vault.lan",
                8200,
                "http://vault.lan:8200",
            ),
            ("http://[::1]:9", "::1", 9, "http://[::1]:9"),
            ("http://[::1]", "::1", 8200, "http://[::1]:8200"),
        ] {
            let address = HttpAddress::parse(text).expect(text);
            assert_eq!((address.host.as_str(), address.port), (host, port));
            assert_eq!(address.to_string(), shown);
            assert_eq!(HttpAddress::parse(shown), Ok(address));
        }
        assert!(
            HttpAddress::parse("http://127.0.0.1:1")
                .expect("ip")
                .is_loopback()
        );
        assert!(
            !HttpAddress::parse("http://10.0.0.1")
                .expect("ip")
                .is_loopback()
        );
    }

    #[test]
    fn other_forms_are_refused_saying_why() {
        for (text, why) in [
            ("https://127.0.0.1:8200", "plain HTTP only"),
            ("127.0.0.1:8200", "must start with http://"),
            ("http://", "expected http://HOST"),
            ("http://h/v1/transit", "no path"),
            ("http://u@h", "no path, user"),
            ("http://h:0", "1 to 65535"),
            ("http://h:99999", "1 to 65535"),
            ("http://h:x", "1 to 65535"),
            ("http://[::1", "unclosed"),
            ("http://[::1]x", "expected :PORT"),
        ] {
            let err = HttpAddress::parse(text).expect_err(text);
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
