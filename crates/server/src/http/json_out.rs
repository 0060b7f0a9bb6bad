//! An answer's JSON text, byte for byte what `serde_json::to_writer`
//! writes (compact), but a string with nothing to escape is copied whole:
//! serde_json looks each byte up in its escape table, and Transit's
//! answers are mostly base64 (a batch of 100 1-KiB ciphertexts is 140 KB
//! of it; that lookup was the largest single cost of a batch item,
//! docs/performance.md). Strings that need escapes, numbers and the rest
//! are written by serde_json itself.

use serde_json::Value;

/// Appends `value` as compact JSON to `out`.
pub fn write(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => serde_json_into(out, number),
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write(out, item);
            }
            out.push(b']');
        }
        Value::Object(fields) => {
            out.push(b'{');
            for (index, (key, item)) in fields.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write(out, item);
            }
            out.push(b'}');
        }
    }
}

/// A JSON string: copied between quotes when no byte of it needs an
/// escape in serde_json's output (a control character, `"` or `\`),
/// else written by serde_json.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    if needs_escape(text.as_bytes()) {
        serde_json_into(out, text);
    } else {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    }
}

/// Whether a byte of `bytes` is a control character, `"` or `\`: eight
/// bytes at a time, without a branch per byte ("Bit Twiddling Hacks":
/// `(v - 0x0101..01 * n) & !v & 0x8080..80` is non-zero exactly when a
/// byte of `v` is below `n`; a borrow only marks bytes above a real one).
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v;
    let mut words = bytes.chunks_exact(8);
    let mut marks = 0;
    for word in &mut words {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        let v = u64::from_le_bytes(eight);
        marks |= below(v, 0x20) | below(v ^ (ONES * 0x22), 1) | below(v ^ (ONES * 0x5c), 1);
    }
    marks & HIGHS != 0
        || words
            .remainder()
            .iter()
            .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// A JSON number (what serde_json writes for it).
pub fn write_uint(out: &mut Vec<u8>, number: u64) {
    serde_json_into(out, &number);
}

/// OpenBao's envelope written as text around a `data` written in place
/// (Transit's items: no `Value` tree per item), its keys in the order
/// serde_json's map writes them, as [`super::router::Reply::Envelope`]'s
/// tree comes out: [`Envelope::open`], then the caller writes `data`'s
/// object into [`Envelope::data`], then [`Envelope::close`].
pub struct Envelope {
    /// The body so far; `data`'s object goes on at its end.
    pub data: Vec<u8>,
}

impl Envelope {
    /// The body up to `data`'s value, in a buffer of `capacity` bytes.
    pub fn open(capacity: usize) -> Self {
        let mut data = Vec::with_capacity(capacity);
        data.extend_from_slice(br#"{"auth":null,"data":"#);
        Envelope { data }
    }

    /// The whole body: the fields after `data`, `warnings` (`null` when
    /// there are none) and a new request id.
    pub fn close(self, warnings: &[String]) -> Vec<u8> {
        let mut out = self.data;
        out.extend_from_slice(
            br#","lease_duration":0,"lease_id":"","renewable":false,"request_id":"#,
        );
        write_str(&mut out, &super::router::request_id());
        out.extend_from_slice(br#","warnings":"#);
        if warnings.is_empty() {
            out.extend_from_slice(b"null");
        } else {
            out.push(b'[');
            for (index, warning) in warnings.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_str(&mut out, warning);
            }
            out.push(b']');
        }
        out.extend_from_slice(br#","wrap_info":null}"#);
        out
    }
}

fn serde_json_into<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("serde_json writes numbers and strings to a Vec");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn written(value: &Value) -> String {
        let mut out = Vec::new();
        write(&mut out, value);
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    /// Every kind of value, strings with each character serde_json
    /// escapes (and some it does not), nested: the same bytes as
    /// serde_json's own compact output.
    #[test]
    fn writes_what_serde_json_writes() {
        let mut tricky: Vec<String> = (0u8..0x80)
            .map(|b| format!("a{}z", char::from(b)))
            .collect();
        tricky.extend(
            [
                "",
                "vault:v1:AbC+/=",
                "é ü 日本 \u{2028} \u{7f}",
                "\"\\\n\t\r\u{8}\u{c}",
            ]
            .map(String::from),
        );
        let value = json!({
            "null": null,
            "true": true,
            "false": false,
            "numbers": [0, -1, 18446744073709551615u64, -9223372036854775808i64, 1.5, -0.0, 1e300],
            "strings": tricky,
            "nested": {"batch_results": [{"ciphertext": "vault:v1:xyz", "key_version": 1, "reference": ""}]},
            "esc\"aped\nkey": {},
            "empty": [],
        });
        let expected = serde_json::to_string(&value).expect("serialises");
        assert_eq!(written(&value), expected);
        for text in &tricky {
            let value = Value::String(text.clone());
            assert_eq!(
                written(&value),
                serde_json::to_string(&value).expect("serialises"),
                "{text:?}"
            );
        }
    }

    /// Each character serde_json escapes, and characters next to them
    /// that it does not, at every place of strings of 1 to 40 bytes:
    /// found in whole eight-byte words and in the rest alike.
    #[test]
    fn an_escape_anywhere_in_a_string_is_found() {
        let specials = [
            '\0', '\n', '\u{1f}', '"', '\\', ' ', '!', '#', '[', ']', '\u{7f}', 'é',
        ];
        for len in 1..=40 {
            for at in 0..len {
                for special in specials {
                    let text = format!("{}{special}{}", "A".repeat(at), "b".repeat(len - at - 1));
                    let expected = special < ' ' || special == '"' || special == '\\';
                    assert_eq!(needs_escape(text.as_bytes()), expected, "{text:?}");
                    let value = Value::String(text);
                    assert_eq!(
                        written(&value),
                        serde_json::to_string(&value).expect("serialises")
                    );
                }
            }
        }
        assert!(!needs_escape(b""));
    }

    /// The envelope written as text is the tree `Reply::Status` renders
    /// for the same `data` and warnings, byte for byte but the request id.
    #[test]
    fn the_written_envelope_is_the_trees() {
        use super::super::router::{Body, Reply};
        let data = json!({"batch_results": [{"ciphertext": "vault:v1:AAAA", "key_version": 1, "reference": "a\"b"}]});
        for warnings in [vec![], vec!["ignored \"x\"".to_owned(), "y".to_owned()]] {
            let mut envelope = Envelope::open(16);
            write(&mut envelope.data, &data);
            let text = envelope.close(&warnings);
            let (status, tree) = Reply::Status {
                status: 200,
                data: data.clone(),
                warnings: warnings.clone(),
            }
            .render();
            assert_eq!(status, 200);
            let Some(Body::Tree(mut tree)) = tree else {
                panic!("a tree");
            };
            let parsed: Value = serde_json::from_slice(&text).expect("valid JSON");
            let id = parsed["request_id"].as_str().expect("an id");
            assert_eq!(id.len(), 36, "{id}");
            tree["request_id"] = json!(id);
            let mut expected = Vec::new();
            write(&mut expected, &tree);
            assert_eq!(
                String::from_utf8(text).expect("UTF-8"),
                String::from_utf8(expected).expect("UTF-8")
            );
        }
    }

    /// A string with a quote is escaped, not copied (the negative
    /// control of the fast path: copying it would break the JSON).
    #[test]
    fn a_string_that_needs_escapes_is_escaped() {
        let out = written(&json!(["say \"hi\"\n"]));
        assert_eq!(out, r#"["say \"hi\"\n"]"#);
        let parsed: Value = serde_json::from_str(&out).expect("valid JSON");
        assert_eq!(parsed, json!(["say \"hi\"\n"]));
    }
}
