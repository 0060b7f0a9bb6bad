//! A Transit data request's body with its items typed: the fields a
//! batch item is read for (`plaintext`, `ciphertext`, `associated_data`,
//! `key_version`, `reference`) borrow the body's text instead of becoming
//! a `serde_json::Value` tree (about ten allocations per item, a fifth of
//! a batch item's time in perf; docs/performance.md). A string with
//! escapes is unescaped into its own buffer. The other top-level fields
//! stay a JSON map, as every other endpoint reads them.
//!
//! What is refused, and how, is what the `Value` tree gave: `null` is
//! absent, a duplicate field's last value counts, a non-string is "not a
//! string" where the handlers check it.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::errors::ApiError;
use super::router::ApiRequest;

/// One field of a batch item (or of a single-item request).
#[derive(Debug, Default, Clone, PartialEq)]
pub enum Slot<'a> {
    /// Not given, or `null`.
    #[default]
    Absent,
    /// A string, borrowed from the body when it had no escapes.
    Str(Cow<'a, str>),
    /// A number.
    Number(Number),
    /// A boolean, an array or an object.
    Other,
}

impl<'a> Slot<'a> {
    /// The field `name` of a parsed map.
    pub fn of(fields: &'a Map<String, Value>, name: &str) -> Slot<'a> {
        match fields.get(name) {
            None | Some(Value::Null) => Slot::Absent,
            Some(Value::String(text)) => Slot::Str(Cow::Borrowed(text)),
            Some(Value::Number(number)) => Slot::Number(number.clone()),
            Some(_) => Slot::Other,
        }
    }

    /// `key_version`-like fields: a non-negative integer, as a number or
    /// a string (absent: `None`); `router::uint_field` reads a parsed
    /// map's fields through it.
    pub fn uint(&self, name: &str) -> Result<Option<u64>, String> {
        let bad = || format!("{name}: not a non-negative integer");
        match self {
            Slot::Absent => Ok(None),
            Slot::Number(number) => number.as_u64().map(Some).ok_or_else(bad),
            Slot::Str(text) => text.trim().parse().map(Some).map_err(|_| bad()),
            Slot::Other => Err(bad()),
        }
    }

    /// A text field (absent: `None`); the message of
    /// `router::str_field`.
    pub fn text(&self, name: &str) -> Result<Option<&str>, String> {
        match self {
            Slot::Absent => Ok(None),
            Slot::Str(text) => Ok(Some(text)),
            Slot::Number(_) | Slot::Other => Err(format!("{name}: not a string")),
        }
    }
}

/// The fields a batch item (or a single-item request) is read for.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ItemFields<'a> {
    /// `plaintext` (encrypt).
    pub plaintext: Slot<'a>,
    /// `ciphertext` (decrypt, rewrap).
    pub ciphertext: Slot<'a>,
    /// `associated_data`.
    pub associated_data: Slot<'a>,
    /// `key_version`.
    pub key_version: Slot<'a>,
    /// `reference` (batch items).
    pub reference: Slot<'a>,
}

impl<'a> ItemFields<'a> {
    /// The item fields of a single-item request's map.
    pub fn of(fields: &'a Map<String, Value>) -> ItemFields<'a> {
        ItemFields {
            plaintext: Slot::of(fields, "plaintext"),
            ciphertext: Slot::of(fields, "ciphertext"),
            associated_data: Slot::of(fields, "associated_data"),
            key_version: Slot::of(fields, "key_version"),
            reference: Slot::of(fields, "reference"),
        }
    }
}

/// One element of `batch_input`.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchEntry<'a> {
    /// An object.
    Item(ItemFields<'a>),
    /// Anything else (the item is refused: "expected a map").
    NotMap,
}

/// `batch_input`.
#[derive(Debug, Default, Clone, PartialEq)]
pub enum Batch<'a> {
    /// Not given, or `null`: the request is the one item.
    #[default]
    Absent,
    /// An array.
    Items(Vec<BatchEntry<'a>>),
    /// Anything else.
    NotArray,
}

/// A Transit data request's body.
#[derive(Debug, Default)]
pub struct TransitBody<'a> {
    /// Every top-level field but `batch_input`.
    pub fields: Map<String, Value>,
    /// `batch_input`, typed.
    pub batch: Batch<'a>,
}

impl<'a> TransitBody<'a> {
    /// `request`'s body, refused as [`ApiRequest::fields`] refuses it
    /// (the same bound on JSON values, the same messages).
    pub fn parse(request: &'a ApiRequest) -> Result<TransitBody<'a>, ApiError> {
        let Some(body) = request.bounded_body()? else {
            return Ok(TransitBody::default());
        };
        match serde_json::from_slice::<TopLevel<'a>>(body) {
            Ok(TopLevel::Object(body)) => Ok(body),
            // `bao write -f` sends `null`.
            Ok(TopLevel::Null) => Ok(TransitBody::default()),
            Ok(TopLevel::NotObject) => Err(ApiError::bad_request(
                "failed to decode JSON input: the body is not a JSON object",
            )),
            Err(err) => Err(ApiError::bad_request(format!(
                "failed to decode JSON input: {err}"
            ))),
        }
    }
}

/// The body's top-level value.
enum TopLevel<'a> {
    Object(TransitBody<'a>),
    Null,
    NotObject,
}

/// The visitor methods of a value that is not the one expected: each
/// answers `$other` (arrays and objects are read through and dropped).
macro_rules! other_values {
    ($other:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($other)
        }
    };
}

/// Reads an array through.
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Reads an object through.
fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

impl<'de> Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TopVisitor;
        impl<'de> Visitor<'de> for TopVisitor {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            other_values!(TopLevel::NotObject);
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(TopLevel::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                skip_seq(seq)?;
                Ok(TopLevel::NotObject)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut body = TransitBody::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "batch_input" {
                        body.batch = map.next_value()?;
                    } else {
                        let value = map.next_value::<Value>()?;
                        body.fields.insert(key, value);
                    }
                }
                Ok(TopLevel::Object(body))
            }
        }
        deserializer.deserialize_any(TopVisitor)
    }
}

impl<'de> Deserialize<'de> for Batch<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BatchVisitor;
        impl<'de> Visitor<'de> for BatchVisitor {
            type Value = Batch<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of batch items")
            }
            other_values!(Batch::NotArray);
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Batch::Absent)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                skip_map(map)?;
                Ok(Batch::NotArray)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Batch::Items(items))
            }
        }
        deserializer.deserialize_any(BatchVisitor)
    }
}

/// The name of a batch item's field, matched without a copy.
enum ItemKey {
    Plaintext,
    Ciphertext,
    AssociatedData,
    KeyVersion,
    Reference,
    Other,
}

impl<'de> Deserialize<'de> for ItemKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = ItemKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<ItemKey, E> {
                Ok(match key {
                    "plaintext" => ItemKey::Plaintext,
                    "ciphertext" => ItemKey::Ciphertext,
                    "associated_data" => ItemKey::AssociatedData,
                    "key_version" => ItemKey::KeyVersion,
                    "reference" => ItemKey::Reference,
                    _ => ItemKey::Other,
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for BatchEntry<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;
        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = BatchEntry<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a batch item")
            }
            other_values!(BatchEntry::NotMap);
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(BatchEntry::NotMap)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                skip_seq(seq)?;
                Ok(BatchEntry::NotMap)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut item = ItemFields::default();
                while let Some(key) = map.next_key::<ItemKey>()? {
                    let slot = match key {
                        ItemKey::Plaintext => &mut item.plaintext,
                        ItemKey::Ciphertext => &mut item.ciphertext,
                        ItemKey::AssociatedData => &mut item.associated_data,
                        ItemKey::KeyVersion => &mut item.key_version,
                        ItemKey::Reference => &mut item.reference,
                        ItemKey::Other => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = map.next_value()?;
                }
                Ok(BatchEntry::Item(item))
            }
        }
        deserializer.deserialize_any(EntryVisitor)
    }
}

impl<'de> Deserialize<'de> for Slot<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SlotVisitor;
        impl<'de> Visitor<'de> for SlotVisitor {
            type Value = Slot<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field's value")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Slot::Str(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Slot::Str(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
                Ok(Slot::Str(Cow::Owned(text)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                Ok(Slot::Number(n.into()))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                Ok(Slot::Number(n.into()))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
                Ok(Number::from_f64(n).map_or(Slot::Other, Slot::Number))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Slot::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Slot::Absent)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                skip_seq(seq)?;
                Ok(Slot::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                skip_map(map)?;
                Ok(Slot::Other)
            }
        }
        deserializer.deserialize_any(SlotVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<(Map<String, Value>, Batch<'_>), String> {
        match serde_json::from_str::<TopLevel<'_>>(body).map_err(|err| err.to_string())? {
            TopLevel::Object(body) => Ok((body.fields, body.batch)),
            TopLevel::Null => Ok((Map::new(), Batch::Absent)),
            TopLevel::NotObject => Err("not an object".to_owned()),
        }
    }

    fn items(body: &str) -> Vec<BatchEntry<'_>> {
        match parse(body).expect("parses").1 {
            Batch::Items(items) => items,
            other => panic!("{body}: batch_input read as {other:?}"),
        }
    }

    #[test]
    fn item_strings_borrow_the_body_unless_escaped() {
        let body = r#"{"batch_input":[{"plaintext":"aGk=","reference":"a\"b","x":[1,{"y":2}]}]}"#;
        let entries = items(body);
        let [BatchEntry::Item(item)] = entries.as_slice() else {
            panic!("not one item: {entries:?}");
        };
        assert!(matches!(item.plaintext, Slot::Str(Cow::Borrowed("aGk="))));
        assert!(matches!(&item.reference, Slot::Str(Cow::Owned(text)) if text == "a\"b"));
        assert_eq!(item.ciphertext, Slot::Absent);
    }

    #[test]
    fn fields_read_as_the_value_tree_reads_them() {
        let body = r#"{"batch_input":[
            {"plaintext":null,"key_version":"3","associated_data":true},
            {"key_version":-1,"reference":5,"plaintext":"a","plaintext":"b"},
            {"key_version":1.5,"ciphertext":{"a":[1]}},
            [1,2], "x", 3, null
        ],"type":"aes128-gcm96","batch_input":[{}]}"#;
        // The last `batch_input` counts, as in a map.
        assert_eq!(items(body), [BatchEntry::Item(ItemFields::default())]);
        let body = body.replacen(r#","batch_input":[{}]"#, "", 1);
        let (fields, batch) = parse(&body).expect("parses");
        assert_eq!(fields.len(), 1, "{fields:?}");
        assert_eq!(fields["type"], "aes128-gcm96");
        let Batch::Items(entries) = batch else {
            panic!("not items")
        };
        let item = |index: usize| match &entries[index] {
            BatchEntry::Item(item) => item.clone(),
            BatchEntry::NotMap => panic!("[{index}] not a map"),
        };
        let first = item(0);
        assert_eq!(first.plaintext, Slot::Absent);
        assert_eq!(first.key_version.uint("key_version"), Ok(Some(3)));
        assert_eq!(first.associated_data, Slot::Other);
        let second = item(1);
        assert_eq!(
            second.key_version.uint("key_version"),
            Err("key_version: not a non-negative integer".to_owned())
        );
        assert_eq!(
            second.reference.text("reference"),
            Err("reference: not a string".to_owned())
        );
        assert_eq!(second.plaintext.text("plaintext"), Ok(Some("b")));
        let third = item(2);
        assert!(third.key_version.uint("key_version").is_err());
        assert_eq!(third.ciphertext, Slot::Other);
        assert_eq!(&entries[3..], [const { BatchEntry::NotMap }; 4]);
    }

    #[test]
    fn batch_and_body_shapes() {
        assert_eq!(
            parse(r#"{"batch_input":null}"#).expect("json").1,
            Batch::Absent
        );
        for other in ["{}", "1", r#""a""#, "true", r#"{"a":[]}"#] {
            let body = format!(r#"{{"batch_input":{other}}}"#);
            assert_eq!(parse(&body).expect("json").1, Batch::NotArray, "{body}");
        }
        assert_eq!(parse("null").expect("json").1, Batch::Absent);
        for not_object in ["[]", "1", r#""x""#, "false"] {
            assert_eq!(
                parse(not_object).map(|_| ()),
                Err("not an object".to_owned())
            );
        }
        let err = parse(r#"{"batch_input":[{"plaintext":"a"}"#).expect_err("truncated");
        let tree = serde_json::from_str::<Value>(r#"{"batch_input":[{"plaintext":"a"}"#)
            .expect_err("truncated");
        assert_eq!(err, tree.to_string(), "the parser's message differs");
    }

    #[test]
    fn single_item_fields_come_from_the_map() {
        let fields: Map<String, Value> =
            serde_json::from_str(r#"{"plaintext":"aGk=","key_version":2,"reference":[]}"#)
                .expect("json");
        let item = ItemFields::of(&fields);
        assert_eq!(item.plaintext.text("plaintext"), Ok(Some("aGk=")));
        assert_eq!(item.key_version.uint("key_version"), Ok(Some(2)));
        assert_eq!(item.reference, Slot::Other);
        assert_eq!(item.associated_data, Slot::Absent);
    }
}
