//! `http://HOST[:PORT]` or `https://HOST[:PORT]`: where an
//! OpenBao-shaped HTTP API listens (the transit seal's server,
//! `--seal-transit-address`; a running aesd, `BAO_ADDR`).

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
    /// `https://`: TLS (the server's certificate checked against a CA
    /// file, [`super::HttpTls`]).
    pub tls: bool,
}

impl HttpAddress {
    /// Parses `http://HOST[:PORT][/]` or `https://HOST[:PORT][/]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (rest, tls) = match (text.strip_prefix("http://"), text.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => return Err(format!("{text}: must start with http:// or https://")),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
            return Err(format!(
                "{text}: expected http(s)://HOST[:PORT] with no path, user or query"
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
            tls,
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
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}", self.host_header())
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
            (
                "https://bao.lan:8201/",
                "bao.lan",
                8201,
                "https://bao.lan:8201",
            ),
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
            ("127.0.0.1:8200", "must start with http:// or https://"),
            ("ftp://h", "must start with http:// or https://"),
            ("http://", "expected http(s)://HOST"),
            ("https://", "expected http(s)://HOST"),
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
