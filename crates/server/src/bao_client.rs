//! A small blocking client of aesd's own HTTP API (OpenBao's JSON) for
//! the `aesd` subcommands that talk to a running aesd: `BAO_ADDR` (as the
//! bao CLI: `http://127.0.0.1:8200` when unset) and `BAO_TOKEN` (or
//! `VAULT_TOKEN`). One connection per request (`Connection: close`).
//! An `https://` address (an aesd with `--tls-cert`) needs `BAO_CACERT`
//! (or `VAULT_CACERT`): the PEM file its certificate is checked against,
//! as for the bao CLI (the aesd's own self-signed certificate will do).

use serde_json::Value;
use zeroize::Zeroizing;

use crate::http_client::{self, HttpAddress, HttpClientError, HttpTls};

/// Why a request to aesd failed.
#[derive(Debug, thiserror::Error)]
pub enum BaoError {
    /// `BAO_ADDR` is not `http(s)://HOST[:PORT]`, or an `https://` one
    /// has no usable `BAO_CACERT`.
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
    tls: Option<HttpTls>,
    token: Zeroizing<String>,
}

impl BaoClient {
    /// From `BAO_ADDR` and `BAO_TOKEN` (or `VAULT_ADDR`, `VAULT_TOKEN`),
    /// and `BAO_CACERT` (or `VAULT_CACERT`) for an `https://` address.
    pub fn from_env() -> Result<Self, BaoError> {
        let var = |names: [&str; 2]| names.iter().find_map(|name| std::env::var(name).ok());
        let address =
            var(["BAO_ADDR", "VAULT_ADDR"]).unwrap_or_else(|| "http://127.0.0.1:8200".to_owned());
        let token = var(["BAO_TOKEN", "VAULT_TOKEN"]).ok_or(BaoError::NoToken)?;
        let ca = var(["BAO_CACERT", "VAULT_CACERT"]).filter(|ca| !ca.is_empty());
        BaoClient::new(&address, token, ca.as_deref().map(std::path::Path::new))
    }

    /// For `address` (`http(s)://HOST[:PORT][/]`, port 8200 by default)
    /// and `token`; `ca` checks an `https://` server's certificate (and is
    /// not used for `http://`, as the bao CLI does).
    pub fn new(
        address: &str,
        token: String,
        ca: Option<&std::path::Path>,
    ) -> Result<Self, BaoError> {
        let address = HttpAddress::parse(address).map_err(BaoError::BadAddress)?;
        let tls = match (address.tls, ca) {
            (false, _) => None,
            (true, Some(ca)) => {
                Some(HttpTls::from_ca_file(ca, "BAO_CACERT").map_err(BaoError::BadAddress)?)
            }
            (true, None) => {
                return Err(BaoError::BadAddress(format!(
                    "{address}: https:// needs BAO_CACERT, the PEM file of the CA (or of aesd's own certificate, --tls-cert) to check the server by"
                )));
            }
        };
        Ok(BaoClient {
            address,
            tls,
            token: Zeroizing::new(token),
        })
    }

    /// `http(s)://HOST:PORT`.
    pub fn addr(&self) -> String {
        self.address.to_string()
    }

    /// `POST /v1/<path>` with `body`: the answer's JSON.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, BaoError> {
        let body = serde_json::to_vec(body).expect("a JSON value serialises");
        let reply = http_client::post(
            &self.address,
            self.tls.as_ref(),
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
        let ok = BaoClient::new("http://127.0.0.1:8200/", "t".into(), None).expect("ok");
        assert_eq!(ok.addr(), "http://127.0.0.1:8200");
        for bad in [
            // https:// without BAO_CACERT.
            "https://127.0.0.1:8200",
            "127.0.0.1:8200",
            "http://",
            "http://h:1/v1",
            "http://h:0",
        ] {
            assert!(
                matches!(
                    BaoClient::new(bad, "t".into(), None),
                    Err(BaoError::BadAddress(_))
                ),
                "{bad}"
            );
        }
    }
}
