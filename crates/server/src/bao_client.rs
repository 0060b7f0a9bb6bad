//! A small blocking client of aesd's own HTTP API (OpenBao's JSON) for
//! the `aesd` subcommands that talk to a running aesd: `BAO_ADDR` (as the
//! bao CLI: `http://127.0.0.1:8200` when unset) and `BAO_TOKEN` (or
//! `VAULT_TOKEN`). One connection per request (`Connection: close`).
//! Plain HTTP only (an aesd with `--tls-cert` serves HTTPS: not yet
//! reachable from here).

use serde_json::Value;
use zeroize::Zeroizing;

use crate::http_client::{self, HttpAddress, HttpClientError};

/// Why a request to aesd failed.
#[derive(Debug, thiserror::Error)]
pub enum BaoError {
    /// `BAO_ADDR` is not `http://HOST[:PORT]`.
    #[error("BAO_ADDR {0}")]
    BadAddress(String),
    /// Neither `BAO_TOKEN` nor `VAULT_TOKEN` is set.
    #[error("no token: set BAO_TOKEN to a token with sudo on the path (the root token)")]
    NoToken,
    /// No HTTP answer (unreachable, no answer in time, not HTTP).
    #[error("aesd: {0}")]
    Http(#[from] HttpClientError),
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
    /// An HTTP answer whose body is not JSON.
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
    address: HttpAddress,
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

    /// For `address` (`http://HOST[:PORT][/]`, port 8200 by default) and
    /// `token`.
    pub fn new(address: &str, token: String) -> Result<Self, BaoError> {
        Ok(BaoClient {
            address: HttpAddress::parse(address).map_err(BaoError::BadAddress)?,
            token: Zeroizing::new(token),
        })
    }

    /// `http://HOST:PORT`.
    pub fn addr(&self) -> String {
        self.address.to_string()
    }

    /// `POST /v1/<path>` with `body`: the answer's JSON.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, BaoError> {
        let body = serde_json::to_vec(body).expect("a JSON value serialises");
        let reply = http_client::post(
            &self.address,
            &format!("/v1/{path}"),
            self.token.as_bytes(),
            &body,
        )?;
        let json: Value =
            serde_json::from_slice(&reply.body).map_err(|err| BaoError::Malformed {
                addr: self.addr(),
                reason: format!("body not JSON: {err}"),
            })?;
        if !(200..300).contains(&reply.status) {
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
                addr: self.addr(),
                status: reply.status,
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
        assert_eq!(ok.addr(), "http://127.0.0.1:8200");
        for bad in [
            "https://127.0.0.1:8200",
            "127.0.0.1:8200",
            "http://",
            "http://h:1/v1",
            "http://h:0",
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
