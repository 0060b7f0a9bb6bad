//! By-name jobs against an `aesd --dev` process (root token `root`), for
//! the by_name and data_keys modules: the admin calls, a token for a
//! policy, a connection with its keyring token, one job, a header's stanza.

use crate::bao_support::{Aesd, raw, request};

use aesd_age::HeaderReader;
use aesd_client::{Client, ClientError};
use aesd_proto::{ErrorCode, Operation};
use serde_json::{Value, json};

/// `method path` with the root token must succeed: its JSON answer.
pub fn admin(aesd: &Aesd, method: &str, path: &str, body: &str) -> Value {
    let (code, answer) = raw(aesd, &request(method, path, Some("root"), body));
    assert!(
        (200..300).contains(&code),
        "{method} {path}: {code} {answer}"
    );
    serde_json::from_str(&answer).unwrap_or(Value::Null)
}

/// A token with the policy `name` granting update on `paths`.
pub fn token_for(aesd: &Aesd, name: &str, paths: &[&str]) -> String {
    let rules: String = paths
        .iter()
        .map(|path| format!("path \"{path}\" {{ capabilities = [\"update\"] }}\n"))
        .collect();
    admin(
        aesd,
        "PUT",
        &format!("/v1/sys/policies/acl/{name}"),
        &json!({ "policy": rules }).to_string(),
    );
    let made = admin(
        aesd,
        "POST",
        "/v1/auth/token/create",
        &json!({ "policies": [name] }).to_string(),
    );
    made["auth"]["client_token"]
        .as_str()
        .expect("client_token")
        .to_owned()
}

pub async fn connect(aesd: &Aesd, token: &str) -> Client {
    let addr = aesd.listen.expect("the job port").to_string();
    let mut client = Client::connect(&addr).await.expect("connect");
    client
        .send_key_token(token.as_bytes())
        .await
        .expect("key token");
    client
}

/// Runs a by-name job: its output, or the error and what came out.
pub async fn job(
    client: &mut Client,
    operation: Operation,
    key: &str,
    input: &[u8],
) -> Result<Vec<u8>, (ErrorCode, Vec<u8>)> {
    let mut out = Vec::new();
    match client
        .run_by_name_job_observed(operation, key, &mut &input[..], &mut out, |_| {})
        .await
    {
        Ok(report) => {
            assert_eq!(report.bytes_received, out.len() as u64);
            Ok(out)
        }
        Err(ClientError::Server(frame)) => Err((frame.code, out)),
        Err(other) => panic!("{operation:?} {key}: {other}"),
    }
}

/// The header's length and its stanza's arguments.
pub fn stanza(file: &[u8]) -> (usize, Vec<String>) {
    let (header, used) = HeaderReader::new()
        .push(file)
        .expect("a header")
        .expect("complete");
    assert_eq!(header.stanzas.len(), 1, "one stanza");
    (used, header.stanzas[0].args.clone())
}
