//! The `--csv` file: one row per transfer, the same fields (and values)
//! as the JSON document's `transfers`, for spreadsheets and pandas.

use std::fmt::Write as _;

use super::json::{Document, TransferJson};

/// The header row's columns, in order (the JSON `transfers[]` fields).
pub const COLUMNS: &[&str] = &[
    "suite",
    "client",
    "server",
    "batch",
    "bytes",
    "start_s",
    "dispatch_delay_s",
    "total_s",
    "queue_s",
    "processing_s",
    "network_s",
    "verified",
    "warmup",
    "error_kind",
    "error",
];

/// The CSV text of `document`'s transfers (RFC 4180: a field holding a
/// comma, quote or line break is quoted; an absent value is empty).
pub fn to_csv(document: &Document) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for transfer in &document.transfers {
        let _ = writeln!(out, "{}", row(transfer).join(","));
    }
    out
}

fn row(transfer: &TransferJson) -> Vec<String> {
    let optional = |value: Option<f64>| value.map(|value| value.to_string()).unwrap_or_default();
    vec![
        quote(&transfer.suite),
        transfer.client.to_string(),
        quote(&transfer.server),
        transfer
            .batch
            .map(|batch| batch.to_string())
            .unwrap_or_default(),
        transfer.bytes.to_string(),
        transfer.start_s.to_string(),
        transfer.dispatch_delay_s.to_string(),
        transfer.total_s.to_string(),
        optional(transfer.queue_s),
        optional(transfer.processing_s),
        optional(transfer.network_s),
        transfer.verified.to_string(),
        transfer.warmup.to_string(),
        quote(transfer.error_kind.as_deref().unwrap_or_default()),
        quote(transfer.error.as_deref().unwrap_or_default()),
    ]
}

fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::json::tests::sample;

    #[test]
    fn one_row_per_transfer_under_the_json_field_names() {
        let document = sample();
        let csv = to_csv(&document);
        let mut lines = csv.lines();
        assert_eq!(lines.next(), Some(COLUMNS.join(",").as_str()));
        let json = serde_json::to_value(&document.transfers[0]).expect("serialises");
        let names: Vec<&str> = json
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut columns = COLUMNS.to_vec();
        columns.sort_unstable();
        let mut names = names;
        names.sort_unstable();
        assert_eq!(columns, names, "CSV columns = JSON transfer fields");
        assert_eq!(lines.clone().count(), document.transfers.len());
        let failed = lines
            .find(|line| line.contains("connect"))
            .expect("a failed row");
        assert!(
            failed.ends_with(",,,,false,false,connect,refused"),
            "{failed}"
        );
    }

    #[test]
    fn awkward_fields_are_quoted() {
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a, \"b\""), "\"a, \"\"b\"\"\"");
    }

    #[test]
    fn the_readme_lists_the_csv_columns() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/aesload.md");
        let readme = std::fs::read_to_string(path).expect("docs/aesload.md");
        let header = COLUMNS.join(",");
        assert!(
            readme.contains(&format!("```\n{header}\n```")),
            "docs/aesload.md must show the CSV header {header}"
        );
    }
}
