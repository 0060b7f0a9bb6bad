//! A small blocking client of aesd's own HTTP API (OpenBao's JSON) for
//! the `aesd` subcommands that talk to a running aesd: `BAO_ADDR` (as the
//! bao CLI: `http://127.0.0.1:8200` when unset) and `BAO_TOKEN` (or
//! `VAULT_TOKEN`). One connection per request (`Connection: close`).
//! Plain HTTP only (an aesd with `--tls-cert` serves HTTPS: not yet
//! reachable from here).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::Value;
use zeroize::Zeroizing;

/// Time to connect, and for each read or write.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Largest answer read.
const MAX_ANSWER: u64 = 1 << 20;

/// Why a request to aesd failed.
#[derive(Debug, thiserror::Error)]
pub enum BaoError {
    /// `BAO_ADDR` is not `http://HOST:PORT`.
    #[error("BAO_ADDR {0:?}: expected http://HOST:PORT (this client speaks plain HTTP only)")]
    BadAddress(String),
    /// Neither `BAO_TOKEN` nor `VAULT_TOKEN` is set.
    #[error("no token: set BAO_TOKEN to a token with sudo on the path (the root token)")]
    NoToken,
    /// The connection failed.
    #[error("cannot reach aesd at {addr}: {err}")]
    Unreachable {
        /// Where.
        addr: String,
        /// Why.
        err: std::io::Error,
    },
    /// aesd answered with an error status.
    #[error("aesd at {addr} refused: HTTP {status}: {message}")]
    Refused {
        /// Where.
        addr: String,
        /// The status.
        status: u16,
        /// OpenBao's `errors`, joined.
        message: String,
    },
    /// Not an HTTP answer with a JSON body.
    #[error("aesd at {addr}: malformed answer: {reason}")]
    Malformed {
        /// Where.
        addr: String,
        /// What is wrong.
        reason: String,
    },
}

/// Where aesd is and the token to send.
pub struct BaoClient {
    /// `HOST:PORT`.
    addr: String,
    token: Zeroizing<String>,
}

impl BaoClient {
    /// From `BAO_ADDR` and `BAO_TOKEN` (or `VAULT_ADDR`, `VAULT_TOKEN`).
    pub fn from_env() -> Result<Self, BaoError> {
        let var = |names: [&str; 2]| names.iter().find_map(|name| std::env::var(name).ok());
        let address =
            var(["BAO_ADDR", "VAULT_ADDR"]).unwrap_or_else(|| "http://127.0.0.1:8200".to_owned());
        let token = var(["BAO_TOKEN", "VAULT_TOKEN"]).ok_or(BaoError::NoToken)?;
        BaoClient::new(&address, token)
    }

    /// For `address` (`http://HOST:PORT[/]`) and `token`.
    pub fn new(address: &str, token: String) -> Result<Self, BaoError> {
        let addr = address
            .strip_prefix("http://")
            .map(|rest| rest.trim_end_matches('/'))
            .filter(|rest| !rest.is_empty() && !rest.contains('/'))
            .ok_or_else(|| BaoError::BadAddress(address.to_owned()))?;
        Ok(BaoClient {
            addr: addr.to_owned(),
            token: Zeroizing::new(token),
        })
    }

    /// `HOST:PORT`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `POST /v1/<path>` with `body`: the answer's JSON.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, BaoError> {
        let unreachable = |err| BaoError::Unreachable {
            addr: self.addr.clone(),
            err,
        };
        let malformed = |reason: &str| BaoError::Malformed {
            addr: self.addr.clone(),
            reason: reason.to_owned(),
        };
        let body = serde_json::to_vec(body).expect("a JSON value serialises");
        let target = self
            .addr
            .to_socket_addrs()
            .map_err(unreachable)?
            .next()
            .ok_or_else(|| unreachable(std::io::Error::other("no address")))?;
        let mut stream = TcpStream::connect_timeout(&target, TIMEOUT).map_err(unreachable)?;
        stream
            .set_read_timeout(Some(TIMEOUT))
            .map_err(unreachable)?;
        stream
            .set_write_timeout(Some(TIMEOUT))
            .map_err(unreachable)?;
        let head = Zeroizing::new(format!(
            "POST /v1/{path} HTTP/1.1\r\nHost: {}\r\nX-Vault-Token: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            self.token.as_str(),
            body.len()
        ));
        stream.write_all(head.as_bytes()).map_err(unreachable)?;
        stream.write_all(&body).map_err(unreachable)?;
        let mut answer = Vec::new();
        stream
            .take(MAX_ANSWER)
            .read_to_end(&mut answer)
            .map_err(unreachable)?;
        let split = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| malformed("no end of the header"))?;
        let status = std::str::from_utf8(&answer[..split])
            .ok()
            .and_then(|head| head.split(' ').nth(1))
            .and_then(|code| code.parse::<u16>().ok())
            .ok_or_else(|| malformed("no status line"))?;
        let json: Value = serde_json::from_slice(&answer[split + 4..])
            .map_err(|err| malformed(&format!("body not JSON: {err}")))?;
        if !(200..300).contains(&status) {
            let message = json["errors"]
                .as_array()
                .map(|errors| {
                    errors
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_default();
            return Err(BaoError::Refused {
                addr: self.addr.clone(),
                status,
                message,
            });
        }
        Ok(json)
    }
}

#[cfg(test)]
mod tests {
    use super::{BaoClient, BaoError};

    #[test]
    fn addresses_are_http_host_and_port() {
        let ok = BaoClient::new("http://127.0.0.1:8200/", "t".into()).expect("ok");
        assert_eq!(ok.addr(), "127.0.0.1:8200");
        for bad in [
            "https://127.0.0.1:8200",
            "127.0.0.1:8200",
            "http://",
            "http://h:1/v1",
        ] {
            assert!(
                matches!(
                    BaoClient::new(bad, "t".into()),
                    Err(BaoError::BadAddress(_))
                ),
                "{bad}"
            );
        }
    }
}
